package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbots/nb/internal/pgtest"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/state/pgstore"
)

// BenchmarkStore measures the PostgreSQL store against the files, side
// by side in one run, on a durable cluster (fsync on, as in production)
// and the files on this machine's disk:
//
//	go test ./state/pgstore -run '^$' -bench Store -benchtime 2000x
//
// exchange: one exchange (Begin, the user's event, the answer, End) on
// one of 50 conversations; p50 and p99 are reported, and the PostgreSQL
// sub-benchmark reports its p50 overhead over the files'. claims: leases
// taken and released (Begin and End without an append) on distinct
// conversations from 8 goroutines. appends: one-event appends from 8
// goroutines, each holding its own conversation.
func BenchmarkStore(b *testing.B) {
	c, err := pgtest.Start(pgtest.Options{Durable: true})
	if errors.Is(err, pgtest.ErrNotInstalled) && os.Getenv("CI") == "" {
		b.Skipf("!!! SKIPPED: %v", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer c.Stop()
	ctx := context.Background()
	dbURL, err := c.NewDatabase(ctx)
	if err != nil {
		b.Fatal(err)
	}
	pg, err := pgstore.Open(ctx, dbURL, pgstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer pg.Close()
	dir, err := os.MkdirTemp("", "nb-bench-files-") // on disk, not in memory
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	files := state.Files{Root: dir}

	var filesP50 time.Duration
	for _, s := range []struct {
		name  string
		store state.Store
	}{{"files", files}, {"postgres", pg}} {
		b.Run("exchange/"+s.name, func(b *testing.B) {
			p50 := exchanges(b, s.store)
			if s.name == "files" {
				filesP50 = p50
			} else if filesP50 > 0 {
				b.ReportMetric(float64(p50-filesP50)/1e6, "overhead-p50-ms")
			}
		})
	}
	b.Run("claims/postgres", func(b *testing.B) {
		var n atomic.Int64
		b.SetParallelism(4) // 8 goroutines on 2 cores
		start := time.Now()
		b.RunParallel(func(p *testing.PB) {
			for p.Next() {
				conv, _ := pg.Open(benchBot, "u", fmt.Sprint("claim", n.Add(1)))
				turn, err := conv.Begin(ctx, nil)
				if err != nil {
					b.Error(err)
					return
				}
				turn.End()
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "claims/s")
	})
	b.Run("appends/postgres", func(b *testing.B) {
		var n atomic.Int64
		b.SetParallelism(4)
		start := time.Now()
		b.RunParallel(func(p *testing.PB) {
			conv, _ := pg.Open(benchBot, "u", fmt.Sprint("appends", n.Add(1)))
			turn, err := conv.Begin(ctx, nil)
			if err != nil {
				b.Error(err)
				return
			}
			defer turn.End()
			ev := state.Event{Who: state.RoleUser, Message: "a message of an ordinary length, about a line of text"}
			for p.Next() {
				if err := turn.Append(ev); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "appends/s")
	})
}

var benchBot = state.Bot{Author: "Bench", Name: "Store", Version: "1"}

// exchanges runs b.N exchanges and reports their p50 and p99.
func exchanges(b *testing.B, s state.Store) time.Duration {
	ctx := context.Background()
	convs := make([]state.Conversation, 50)
	for i := range convs {
		convs[i], _ = s.Open(benchBot, "user", fmt.Sprint("key", i))
	}
	q := state.Event{Who: state.RoleUser, Mode: "eval", Message: "What is the weather like in Zürich today?"}
	a := state.Event{Who: state.RoleAI, Mode: "eval", Message: "Sunny, 21 °C, a light wind from the west."}
	times := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		turn, err := convs[i%len(convs)].Begin(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := turn.Append(q); err != nil {
			b.Fatal(err)
		}
		if err := turn.Append(a); err != nil {
			b.Fatal(err)
		}
		turn.End()
		times = append(times, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(times)
	p50, p99 := times[len(times)/2], times[len(times)*99/100]
	b.ReportMetric(float64(p50)/1e6, "p50-ms")
	b.ReportMetric(float64(p99)/1e6, "p99-ms")
	return p50
}
