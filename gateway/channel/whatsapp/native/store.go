//go:build whatsmeow

package native

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql's "pgx" driver, for the PostgreSQL store
	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/store/sqlstore"
	waLog "go.mau.fi/whatsmeow/util/log"
	_ "modernc.org/sqlite" // database/sql's "sqlite" driver: pure Go, no cgo

	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/internal/pgurl"
)

// Store is the device store: whatsmeow's own tables (whatsmeow_device,
// whatsmeow_sessions, whatsmeow_pre_keys, …), in PostgreSQL when env has
// it, else in StoreFile under env.StateDir.
type Store struct {
	*sqlstore.Container
	// Name says where it is, without a password.
	Name string
}

// OpenStore opens (and creates or upgrades) the device store of env.
// The SQLite file is kept in the state folder rather than in the
// workspace: it holds the keys of the WhatsApp account, which the
// agent's file tools must not reach.
func OpenStore(ctx context.Context, env channel.Env, log waLog.Logger) (*Store, error) {
	if env.Postgres != "" {
		c, err := sqlstore.New(ctx, "pgx", env.Postgres, log)
		if err != nil {
			return nil, fmt.Errorf("whatsapp device store in %s: %w", pgurl.Redact(env.Postgres), err)
		}
		return &Store{Container: c, Name: pgurl.Redact(env.Postgres)}, nil
	}
	if env.StateDir == "" {
		return nil, errors.New("whatsapp: no state folder for the device store")
	}
	if err := os.MkdirAll(env.StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("whatsapp device store: %w", err)
	}
	path := filepath.Join(env.StateDir, StoreFile)
	// Created 0600 before SQLite opens it: it holds the account's keys.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("whatsapp device store: %w", err)
	}
	f.Close()
	dsn := "file:" + path + "?_pragma=foreign_keys(1)&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"
	c, err := sqlstore.New(ctx, "sqlite", dsn, log)
	if err != nil {
		return nil, fmt.Errorf("whatsapp device store %s: %w", path, err)
	}
	return &Store{Container: c, Name: path}, nil
}

// Device is the store's device: the linked one, or a new, unlinked one
// (which Login links). The store keeps one WhatsApp account: a second
// device in it (linked by another program) is refused rather than
// guessed at.
func (s *Store) Device(ctx context.Context) (*store.Device, error) {
	all, err := s.GetAllDevices(ctx)
	if err != nil {
		return nil, fmt.Errorf("whatsapp device store %s: %w", s.Name, err)
	}
	switch len(all) {
	case 0:
		return s.NewDevice(), nil
	case 1:
		return all[0], nil
	}
	return nil, fmt.Errorf("whatsapp device store %s holds %d linked devices; nb uses one: remove the others (whatsmeow_device)", s.Name, len(all))
}
