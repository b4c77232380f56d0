package main

import (
	"context"
	"strings"

	"github.com/nbots/nb/eventlog"
	"github.com/nbots/nb/eventlog/pglog"
	"github.com/nbots/nb/internal/pgurl"
)

// openServeStore opens what nb serve's replicas share beyond their
// conversations (streams, stored responses, tool rounds, agent runs) in
// the database of --store, else NB_STORE, when it is PostgreSQL; nil
// otherwise (the files, or nothing): everything then stays in memory.
func (a *App) openServeStore(ctx context.Context, flagURL string, o pglog.Options) (*pglog.Store, error) {
	url := strings.TrimSpace(flagURL)
	if url == "" {
		url = strings.TrimSpace(a.Getenv("NB_STORE"))
	}
	if !pgurl.Is(url) {
		return nil, nil
	}
	s, err := pglog.Open(ctx, url, o)
	if err != nil {
		return nil, err
	}
	o.Log.Info("sharing streams, responses and agent runs with the other replicas", "store", s.Name(), "replica", s.Replica())
	return s, nil
}

// sharedOrNil keeps a nil store a nil interface.
func sharedOrNil(s *pglog.Store) eventlog.Shared {
	if s == nil {
		return nil
	}
	return s
}
