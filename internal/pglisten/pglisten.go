// Package pglisten keeps a PostgreSQL connection LISTENing on a
// notification channel: the stores of nb that share a database (runs,
// conversations, logs) learn of each other's writes this way, and poll
// when the database is out of reach.
package pglisten

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Listen holds a connection of its own, made with cfg (a copy of it),
// that LISTENs on channel, until ctx ends: it gives each notification's
// payload to notify, in the order they come. When the connection cannot
// be made or is lost, it calls lost with why (when lost is not nil),
// waits pause and connects again: a notification sent in between is
// missed, so lost should wake whoever may have missed one.
func Listen(ctx context.Context, cfg *pgconn.Config, channel string, pause time.Duration, notify func(payload string), lost func(error)) {
	Watch(ctx, cfg, channel, pause, Callbacks{Notify: notify, Lost: lost})
}

// Callbacks are what Watch calls; nil ones are not called.
type Callbacks struct {
	// Listening is called each time the connection LISTENs, the first
	// time and after each reconnection: from then on no notification is
	// missed, but those sent before (while it was connecting) were, so
	// Listening should look for what they would have told.
	Listening func()
	// Notify is given each notification's payload, in the order they
	// come.
	Notify func(payload string)
	// Lost is told why the connection could not be made or was lost.
	Lost func(error)
}

// Watch is Listen with a Listening callback: it holds a connection of
// its own, made with cfg (a copy of it), that LISTENs on channel, until
// ctx ends, and reconnects after pause when it cannot connect or the
// connection is lost.
func Watch(ctx context.Context, cfg *pgconn.Config, channel string, pause time.Duration, cb Callbacks) {
	for {
		err := listenOnce(ctx, cfg, channel, cb)
		if ctx.Err() != nil {
			return
		}
		if cb.Lost != nil {
			cb.Lost(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
	}
}

func listenOnce(ctx context.Context, cfg *pgconn.Config, channel string, cb Callbacks) error {
	cfg = cfg.Copy()
	// Notifications are handed over as the connection reads them: while
	// it waits, or, for those that came with LISTEN's answer, during Exec.
	cfg.OnNotification = func(_ *pgconn.PgConn, n *pgconn.Notification) {
		if n.Channel == channel && cb.Notify != nil {
			cb.Notify(n.Payload)
		}
	}
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background()) //nolint:errcheck // dropping it
	if _, err := conn.Exec(ctx, "LISTEN "+Identifier(channel)).ReadAll(); err != nil {
		return err
	}
	if cb.Listening != nil {
		cb.Listening()
	}
	for {
		if err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
	}
}

// Identifier quotes name as an SQL identifier: in double quotes, those
// inside doubled, a NUL (which no identifier may hold) dropped.
func Identifier(name string) string {
	name = strings.ReplaceAll(name, "\x00", "")
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}
