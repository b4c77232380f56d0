package pgstore

import (
	"context"
	"fmt"

	"github.com/nbots/nb/internal/pgpool"
)

// migrations are the schema's versions, applied in order once each and
// recorded in nb_state_migrations. A version is never edited once
// released: a change is a new version.
var migrations = []string{
	// 1: conversations, their events and kept outputs, and the leases.
	// Names (end users, keys, output names) are bytes: any text, NULs
	// included, or their soft encryption. sealed tells the encrypted
	// conversations (names and contents) from the plain ones.
	`CREATE TABLE nb_conversations (
		id         bigserial PRIMARY KEY,
		bot        text NOT NULL,
		sealed     boolean NOT NULL,
		end_user   bytea NOT NULL,
		key        bytea NOT NULL,
		events     integer NOT NULL DEFAULT 0,
		updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
		UNIQUE (bot, sealed, end_user, key)
	);
	CREATE INDEX nb_conversations_recent ON nb_conversations (bot, updated_at DESC);
	CREATE TABLE nb_events (
		conversation bigint NOT NULL REFERENCES nb_conversations ON DELETE CASCADE,
		seq          integer NOT NULL,
		data         text NOT NULL,
		PRIMARY KEY (conversation, seq)
	);
	CREATE TABLE nb_outputs (
		conversation bigint NOT NULL REFERENCES nb_conversations ON DELETE CASCADE,
		name         bytea NOT NULL,
		data         bytea NOT NULL,
		PRIMARY KEY (conversation, name)
	);
	CREATE TABLE nb_leases (
		bot        text NOT NULL,
		sealed     boolean NOT NULL,
		end_user   bytea NOT NULL,
		key        bytea NOT NULL,
		holder     text NOT NULL,
		expires_at timestamptz NOT NULL,
		PRIMARY KEY (bot, sealed, end_user, key)
	);`,
}

// migrationLock is the advisory lock that serializes the replicas'
// migrations (an arbitrary constant: "nbstate" in ASCII).
const migrationLock = 0x6e627374617465

// migrate brings the schema to the last version, in one transaction
// under an advisory lock, so replicas starting together apply each
// version once. A schema already current is only read: a role without
// the right to create tables can use it.
func migrate(ctx context.Context, pool *pgpool.Pool) error {
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass('nb_state_migrations') IS NOT NULL").Scan(&exists); err != nil {
		return err
	}
	if exists {
		var current int
		if err := pool.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM nb_state_migrations").Scan(&current); err != nil {
			return err
		}
		if current == len(migrations) {
			return nil
		}
	}
	return pool.BeginFunc(ctx, func(tx *pgpool.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrationLock)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS nb_state_migrations (
			version    integer PRIMARY KEY,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		var current int
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM nb_state_migrations").Scan(&current); err != nil {
			return err
		}
		if current > len(migrations) {
			return fmt.Errorf("the database's conversation schema is version %d, newer than this nb knows (%d): upgrade nb", current, len(migrations))
		}
		for v := current + 1; v <= len(migrations); v++ {
			if _, err := tx.Exec(ctx, migrations[v-1]); err != nil {
				return fmt.Errorf("schema version %d: %w", v, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO nb_state_migrations (version) VALUES ($1)", v); err != nil {
				return err
			}
		}
		return nil
	})
}
