package main

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/internal/pgurl"
	"github.com/nbots/nb/pipeline/runstore/runsurl"
	"github.com/nbots/nb/server"
	"github.com/nbots/nb/server/pipelinesrv"
)

// mountPipelines serves POST /pipelines and its runs' routes. With a
// postgres:// store (--store, else NB_STORE) the runs live in the
// database, shared with the other replicas: any replica answers a run's
// state and events, and a run whose replica died (its lease, as long as
// --replica-timeout, expired) is taken over by another. Otherwise they
// live in this process and its run folders. close stops the runs still
// going here (another replica takes the stored ones over).
func (a *App) mountPipelines(ctx context.Context, srv *server.Server, host bot.Host, storeURL, runsDir string, ttl time.Duration, log *slog.Logger) (closeAll func(), err error) {
	if runsDir == "" {
		runsDir = pipelinesrv.DefaultRunsDir(a.Getenv)
	}
	url := strings.TrimSpace(storeURL)
	if url == "" {
		url = strings.TrimSpace(a.Getenv("NB_STORE"))
	}
	if !pgurl.Is(url) {
		h := pipelinesrv.Mount(srv, pipelinesrv.Options{RunsDir: runsDir, Host: host})
		return func() { h.Close() }, nil //nolint:errcheck // never fails
	}
	st, err := runsurl.Open(ctx, url, ttl)
	if err != nil {
		return nil, err
	}
	h := pipelinesrv.Mount(srv, pipelinesrv.Options{RunsDir: runsDir, Host: host,
		Runs: &pipelinesrv.Stored{Store: st, Dir: runsDir, Log: log}})
	actx, stop := context.WithCancel(ctx)
	adopted := make(chan struct{})
	go func() {
		defer close(adopted)
		h.Adopt(actx, time.Second)
	}()
	go func() {
		select {
		case <-srv.Done():
		case <-actx.Done():
		}
		stop()
	}()
	log.Info("pipeline runs kept in the shared store: a run whose replica died is taken over here", "store", st.Name)
	return func() {
		stop()
		<-adopted
		h.Close() //nolint:errcheck // never fails
		st.Close()
	}, nil
}
