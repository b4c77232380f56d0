// Package storeurl opens the conversation store a URL names (nb's
// --store and NB_STORE): PostgreSQL for postgres:// and postgresql://,
// the files under a folder for file:///folder, the default files for
// none. Its messages show a URL without its password. A store a URL
// names counts its operations (nb_store_op_duration_seconds,
// nb_store_op_errors_total).
package storeurl

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/nbots/nb/internal/pgurl"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/state/pgstore"
)

// Options are what opening a store needs besides its URL.
type Options struct {
	// Password encrypts the conversations (NANO_BOTS_ENCRYPTION_PASSWORD);
	// "" keeps them plain.
	Password string
	// Root is the files' state root when the URL is empty (see
	// state.RootFrom).
	Root string
	// LeaseTTL is how long a database's lease on a conversation lasts
	// without renewal (0: pgstore.DefaultLeaseTTL).
	LeaseTTL time.Duration
}

// Store is an open store.
type Store struct {
	state.Store
	// Name is the URL without its credentials, for people.
	Name string
	// Shared tells a store that replicas share (a database) from the
	// files of this machine.
	Shared bool
	pg     *pgstore.Store
	pgURL  string
}

// PostgresURL is the database's URL, password included, for what keeps
// its own tables beside the conversations (WhatsApp's native session);
// "" for files.
func (s *Store) PostgresURL() string {
	if s == nil {
		return ""
	}
	return s.pgURL
}

// Ping checks that the store can be reached: a replica whose store does
// not answer is not ready.
func (s *Store) Ping(ctx context.Context) error {
	if s.pg != nil {
		return s.pg.Ping(ctx)
	}
	return nil
}

// Close releases the store's connections.
func (s *Store) Close() {
	if s.pg != nil {
		s.pg.Close()
	}
}

// Open opens the store of raw: "" is the files under o.Root,
// file:///folder the files under folder, postgres://… a database.
func Open(ctx context.Context, raw string, o Options) (*Store, error) {
	raw = strings.TrimSpace(raw)
	var cipher *state.Cipher
	if o.Password != "" {
		cipher = state.NewCipher(o.Password)
	}
	switch {
	case raw == "":
		return &Store{Store: state.Files{Root: o.Root, Cipher: cipher}, Name: o.Root}, nil
	case pgurl.Is(raw):
		pg, err := pgstore.Open(ctx, raw, pgstore.Options{Cipher: cipher, LeaseTTL: o.LeaseTTL})
		if err != nil {
			return nil, fmt.Errorf("conversation store: %w", err)
		}
		return &Store{Store: metered{pg, "postgres"}, Name: pgurl.Redact(raw), Shared: true, pg: pg, pgURL: raw}, nil
	case strings.HasPrefix(strings.ToLower(raw), "file:"):
		u, err := url.Parse(raw)
		if err != nil || u.Path == "" || !filepath.IsAbs(u.Path) || (u.Host != "" && u.Host != "localhost") {
			return nil, fmt.Errorf("conversation store %s: a file URL names an absolute folder: file:///var/lib/nb/state", pgurl.Redact(raw))
		}
		return &Store{Store: metered{state.Files{Root: filepath.Clean(u.Path), Cipher: cipher}, "files"}, Name: filepath.Clean(u.Path)}, nil
	default:
		return nil, fmt.Errorf("conversation store %s: unknown kind of store: use postgres://user:password@host:port/database, file:///folder, or nothing for the files", pgurl.Redact(raw))
	}
}
