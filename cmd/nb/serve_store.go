package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/nbots/nb/eventlog"
	"github.com/nbots/nb/eventlog/pglog"
)

// openServeStore opens the store nb serve's replicas share: --store, else
// NB_STORE; nil when neither is set (everything stays in memory).
func (a *App) openServeStore(ctx context.Context, flagURL string, o pglog.Options) (*pglog.Store, error) {
	url := strings.TrimSpace(flagURL)
	if url == "" {
		url = strings.TrimSpace(a.Getenv("NB_STORE"))
	}
	if url == "" {
		return nil, nil
	}
	if !strings.HasPrefix(url, "postgres://") && !strings.HasPrefix(url, "postgresql://") {
		return nil, &usageError{fmt.Sprintf("--store %s: nb serve shares its state in PostgreSQL only: give a postgres:// URL", pglog.Redact(url))}
	}
	s, err := pglog.Open(ctx, url, o)
	if err != nil {
		return nil, err
	}
	o.Log.Info("sharing state with the other replicas", "store", s.Name(), "replica", s.Replica())
	return s, nil
}

// sharedOrNil keeps a nil store a nil interface.
func sharedOrNil(s *pglog.Store) eventlog.Shared {
	if s == nil {
		return nil
	}
	return s
}
