package pglog_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nbots/nb/eventlog"
	"github.com/nbots/nb/eventlog/pglog"
	"github.com/nbots/nb/internal/pgtest"
)

// quiet keeps the benchmarks' output clean.
var quiet = slog.New(slog.DiscardHandler)

// BenchmarkEvent is the time from a piece of output written on one
// replica to a reader seeing it: in memory, the reader of the same log;
// on PostgreSQL, the reader of a copy on another replica (the write, the
// notification, the read).
func BenchmarkEvent(b *testing.B) {
	b.Run("memory", func(b *testing.B) {
		l := eventlog.New(1 << 40) // never full, however many rounds
		benchEvents(b, l, l)
	})
	for _, batch := range []time.Duration{0, 2 * time.Millisecond} {
		name := "postgres"
		if batch > 0 {
			name += "-batch2ms"
		}
		b.Run(name, func(b *testing.B) { benchShared(b, batch) })
	}
}

func benchShared(b *testing.B, batch time.Duration) {
	{
		url := pgtest.New(b)
		ctx := context.Background()
		a := replica(b, url, "a", pglog.Options{Log: quiet, Batch: batch})
		r := replica(b, url, "b", pglog.Options{Log: quiet})
		l := eventlog.New(1 << 40)
		if err := a.Publish(ctx, "s", "", l, eventlog.Limits{Count: 10, Bytes: 1 << 30, TTL: time.Minute}, nil); err != nil {
			b.Fatal(err)
		}
		c, stop, err := r.Follow(ctx, "s", "", 1<<40)
		if err != nil || c == nil {
			b.Fatal(err)
		}
		defer stop()
		benchEvents(b, l, c)
	}
}

func benchEvents(b *testing.B, w, r *eventlog.Log) {
	b.ReportAllocs()
	seen := 0
	for b.Loop() {
		w.WriteString("piece of output ")
		want := seen + len("piece of output ")
		for {
			st := r.State()
			if st.TextLen >= want {
				break
			}
			<-st.Changed
		}
		seen = want
	}
}

// BenchmarkValue is a stored response kept on one replica and read on
// another (PostgreSQL), or kept and read in memory.
func BenchmarkValue(b *testing.B) {
	value := make([]byte, 4<<10)
	lim := eventlog.Limits{Count: 1 << 20, Bytes: 1 << 30, TTL: time.Hour}
	b.Run("memory", func(b *testing.B) {
		k := eventlog.NewKeeper[[]byte]("response", lim, nil, nil, nil, nil)
		ctx := context.Background()
		for b.Loop() {
			k.Put(ctx, "id", "", value, int64(len(value))) //nolint:errcheck // memory
			if _, ok, _ := k.Get(ctx, "id", ""); !ok {
				b.Fatal("not kept")
			}
		}
	})
	b.Run("postgres", func(b *testing.B) {
		url := pgtest.New(b)
		ctx := context.Background()
		a := replica(b, url, "a", pglog.Options{Log: quiet})
		r := replica(b, url, "b", pglog.Options{Log: quiet})
		i := 0
		for b.Loop() {
			i++
			id := "resp_" + string(rune('a'+i%26)) + time.Now().Format("150405.000000000")
			if err := a.Put(ctx, "response", id, "", value, eventlog.Summary{}, lim); err != nil {
				b.Fatal(err)
			}
			if _, err := r.Get(ctx, "response", id, ""); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkFollow is the first read, on another replica, of a finished
// stream of 4 KiB: what a poll that reaches a replica without a copy
// adds (later polls read the copy, as on one machine).
func BenchmarkFollow(b *testing.B) {
	url := pgtest.New(b)
	ctx := context.Background()
	a := replica(b, url, "a", pglog.Options{Log: quiet})
	r := replica(b, url, "b", pglog.Options{Log: quiet})
	l := eventlog.New(0)
	if err := a.Publish(ctx, "s", "", l, eventlog.Limits{Count: 10, Bytes: 1 << 30, TTL: time.Minute}, nil); err != nil {
		b.Fatal(err)
	}
	for range 64 {
		l.WriteString(string(make([]byte, 64)))
	}
	l.Finish(nil, "")
	for {
		c, stop, err := r.Follow(ctx, "s", "", 0)
		if err != nil {
			b.Fatal(err)
		}
		stop()
		if c.State().Status != eventlog.Open {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	for b.Loop() {
		c, stop, err := r.Follow(ctx, "s", "", 0)
		if err != nil || c.State().TextLen != 4096 {
			b.Fatal(err)
		}
		stop()
	}
}
