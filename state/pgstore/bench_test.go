package pgstore_test

import (
	"context"
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
// sub-benchmark reports its p50 overhead over the files' on disk
// (overhead-p50-ms) and in memory (over-memory-p50-ms). claims: leases
// taken and released (Begin and End without an append) on distinct
// conversations from 8 goroutines. appends: one-event appends from 8
// goroutines, each holding its own conversation.
func BenchmarkStore(b *testing.B) {
	dbURL := pgtest.Durable(b)
	ctx := context.Background()
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
	stores := []state.Store{files, pg}
	names := []string{"files", "postgres"}
	// The files in memory too, when there is /dev/shm: the store's own
	// cost, without the disk's syncs.
	if mem, err := os.MkdirTemp("/dev/shm", "nb-bench-files-"); err == nil {
		defer os.RemoveAll(mem)
		stores = append(stores, state.Files{Root: mem})
		names = append(names, "memory")
	}
	b.Run("exchange", func(b *testing.B) {
		// One exchange on each store in turn, so that all see the same
		// load (this machine's load varies from second to second).
		times := exchanges(b, stores)
		p50 := make([]time.Duration, len(stores))
		for i, ts := range times {
			p50[i] = percentile(ts, 50)
			b.ReportMetric(float64(p50[i])/1e6, names[i]+"-p50-ms")
		}
		b.ReportMetric(float64(percentile(times[1], 99))/1e6, "postgres-p99-ms")
		// The overhead: the median of the differences of the exchanges
		// run side by side.
		diff := make([]time.Duration, len(times[0]))
		for j := range diff {
			diff[j] = times[1][j] - times[0][j]
		}
		b.ReportMetric(float64(percentile(diff, 50))/1e6, "overhead-p50-ms")
		if len(stores) > 2 {
			for j := range diff {
				diff[j] = times[1][j] - times[2][j]
			}
			b.ReportMetric(float64(percentile(diff, 50))/1e6, "over-memory-p50-ms")
		}
	})
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

// exchanges runs b.N exchanges on each store, in turn, and returns
// their durations per store.
func exchanges(b *testing.B, stores []state.Store) [][]time.Duration {
	ctx := context.Background()
	convs := make([][]state.Conversation, len(stores))
	times := make([][]time.Duration, len(stores))
	for i, s := range stores {
		convs[i] = make([]state.Conversation, 50)
		for j := range convs[i] {
			convs[i][j], _ = s.Open(benchBot, "user", fmt.Sprint("key", j))
		}
		times[i] = make([]time.Duration, 0, b.N)
	}
	q := state.Event{Who: state.RoleUser, Mode: "eval", Message: "What is the weather like in Zürich today?"}
	a := state.Event{Who: state.RoleAI, Mode: "eval", Message: "Sunny, 21 °C, a light wind from the west."}
	b.ResetTimer()
	for n := range b.N {
		for i := range stores {
			start := time.Now()
			turn, err := convs[i][n%50].Begin(ctx, nil)
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
			times[i] = append(times[i], time.Since(start))
		}
	}
	b.StopTimer()
	return times
}

// percentile returns the p-th percentile of ts (sorting a copy).
func percentile(ts []time.Duration, p int) time.Duration {
	s := slices.Clone(ts)
	slices.Sort(s)
	return s[min(len(s)*p/100, len(s)-1)]
}
