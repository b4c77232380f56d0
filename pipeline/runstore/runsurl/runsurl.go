// Package runsurl opens the pipeline run store a URL names, as nb's
// --store names stores: postgres:// (or postgresql://) a database
// (package pgruns), file:///folder the runs under a folder (package
// fileruns). Its messages show a URL without its password. The store
// counts its operations (nb_store_op_duration_seconds,
// nb_store_op_errors_total, store "runs").
package runsurl

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/nbots/nb/internal/pgurl"
	"github.com/nbots/nb/pipeline/runstore"
	"github.com/nbots/nb/pipeline/runstore/fileruns"
	"github.com/nbots/nb/pipeline/runstore/pgruns"
)

// Store is an open run store.
type Store struct {
	runstore.Store
	// Name is the URL without its credentials, for people.
	Name  string
	close func()
	files *fileruns.Store
}

// Dir is the folder of run id when the runs are kept in folders
// (file:///…), "" in a database.
func (s *Store) Dir(id string) string {
	if s.files == nil {
		return ""
	}
	return s.files.Dir(id)
}

// Close releases the store's connections.
func (s *Store) Close() {
	if s.close != nil {
		s.close()
	}
}

// Open opens the run store of raw; ttl is a database lease's TTL (0:
// pgruns.DefaultLeaseTTL).
func Open(ctx context.Context, raw string, ttl time.Duration) (*Store, error) {
	raw = strings.TrimSpace(raw)
	switch {
	case pgurl.Is(raw):
		s, err := pgruns.Open(ctx, raw, pgruns.Options{LeaseTTL: ttl})
		if err != nil {
			return nil, fmt.Errorf("pipeline run store: %w", err)
		}
		return &Store{Store: metered{s, "postgres"}, Name: pgurl.Redact(raw), close: s.Close}, nil
	case strings.HasPrefix(strings.ToLower(raw), "file:"):
		u, err := url.Parse(raw)
		if err != nil || u.Path == "" || !filepath.IsAbs(u.Path) || (u.Host != "" && u.Host != "localhost") {
			return nil, fmt.Errorf("pipeline run store %s: a file URL names an absolute folder: file:///var/lib/nb/pipelines", pgurl.Redact(raw))
		}
		s, err := fileruns.Open(u.Path)
		if err != nil {
			return nil, err
		}
		return &Store{Store: metered{s, "files"}, Name: u.Path, files: s}, nil
	}
	return nil, fmt.Errorf("pipeline run store %s: want postgres://user:password@host:port/database or file:///folder", pgurl.Redact(raw))
}
