package pglog

import (
	"context"
	"fmt"

	"github.com/nbots/nb/internal/pgpool"
)

// schema is the tables of the store. Times are the database's (now()),
// so that the replicas' clocks need not agree; a log's started and
// finished are its writer's, shown to clients.
const schema = `
CREATE TABLE IF NOT EXISTS nb_serve_replicas (
	id   text PRIMARY KEY,
	seen timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS nb_serve_logs (
	id       text PRIMARY KEY,
	owner    text NOT NULL,
	replica  text NOT NULL,
	started  timestamptz NOT NULL,
	finished timestamptz,
	status   smallint NOT NULL DEFAULT 0,
	err      text NOT NULL DEFAULT '',
	cut      boolean NOT NULL DEFAULT false,
	text_len bigint NOT NULL DEFAULT 0,
	ttl      interval NOT NULL,
	expires  timestamptz,
	read     timestamptz
);
CREATE INDEX IF NOT EXISTS nb_serve_logs_open ON nb_serve_logs (replica) WHERE status = 0;
CREATE INDEX IF NOT EXISTS nb_serve_logs_expires ON nb_serve_logs (expires);
CREATE TABLE IF NOT EXISTS nb_serve_log_chunks (
	id    text NOT NULL REFERENCES nb_serve_logs ON DELETE CASCADE,
	start bigint NOT NULL,
	text  bytea NOT NULL,
	PRIMARY KEY (id, start)
);
CREATE TABLE IF NOT EXISTS nb_serve_values (
	kind    text NOT NULL,
	id      text NOT NULL,
	owner   text NOT NULL,
	value   bytea NOT NULL,
	put     timestamptz NOT NULL,
	expires timestamptz NOT NULL,
	PRIMARY KEY (kind, id)
);
CREATE INDEX IF NOT EXISTS nb_serve_values_expires ON nb_serve_values (expires);
ALTER TABLE nb_serve_values ADD COLUMN IF NOT EXISTS summary bytea NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS nb_serve_values_put ON nb_serve_values (kind, put DESC);
`

// schemaLock serialises the creation of the tables by replicas that
// start together (CREATE … IF NOT EXISTS races otherwise).
const schemaLock = 0x6e625f7365727665 // "nb_serve"

func (s *Store) migrate(ctx context.Context) error {
	var schemaErr error
	err := s.pool.BeginFunc(ctx, func(tx *pgpool.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(schemaLock)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, schema); err != nil {
			schemaErr = fmt.Errorf("create the tables of nb serve's shared state: %w", err)
			return schemaErr
		}
		return nil
	})
	if err != nil && err == schemaErr {
		return err
	}
	return s.failed(err)
}
