// Package pglisten keeps a PostgreSQL connection LISTENing on a
// notification channel: the stores of nb that share a database (runs,
// conversations, logs) learn of each other's writes this way, and poll
// when the database is out of reach.
package pglisten

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Listen holds a connection of its own, made with cfg (a copy of it),
// that LISTENs on channel, until ctx ends: it gives each notification's
// payload to notify, in the order they come. When the connection cannot
// be made or is lost, it calls lost with why (when lost is not nil),
// waits pause and connects again: a notification sent in between is
// missed, so lost should wake whoever may have missed one.
func Listen(ctx context.Context, cfg *pgx.ConnConfig, channel string, pause time.Duration, notify func(payload string), lost func(error)) {
	for {
		err := listenOnce(ctx, cfg, channel, notify)
		if ctx.Err() != nil {
			return
		}
		if lost != nil {
			lost(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
	}
}

func listenOnce(ctx context.Context, cfg *pgx.ConnConfig, channel string, notify func(string)) error {
	conn, err := pgx.ConnectConfig(ctx, cfg.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background()) //nolint:errcheck // dropping it
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		notify(n.Payload)
	}
}
