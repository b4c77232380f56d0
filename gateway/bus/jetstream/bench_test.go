package jetstream_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/bus/jetstream"
	"github.com/nbots/nb/internal/natstest"
)

// BenchmarkInbound measures durable inbound messages through one node:
// publishers (8 goroutines, as channels' receive loops) publish b.N
// messages over 1,000 sessions, and one replica's handler (instant)
// takes them; it reports msg/s and the p50/p99 from publish to dispatch.
func BenchmarkInbound(b *testing.B) {
	s := natstest.Start(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bb, err := jetstream.Dial(ctx, s.URL(), "bench", jetstream.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer bb.Close()
	var (
		mu    sync.Mutex
		lat   = make([]time.Duration, 0, b.N)
		count atomic.Int64
		done  = make(chan struct{})
	)
	go bb.Inbound(ctx, func(ctx context.Context, m bus.Inbound) error { //nolint:errcheck // ends with ctx
		d := time.Since(m.Timestamp)
		mu.Lock()
		lat = append(lat, d)
		mu.Unlock()
		if count.Add(1) == int64(b.N) {
			close(done)
		}
		return nil
	})
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	const publishers = 32
	for p := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := p; i < b.N; i += publishers {
				m := bus.Inbound{Channel: "telegram", ID: fmt.Sprint(i), ChatID: fmt.Sprint(i % 1000), Content: "hello", Timestamp: time.Now()}
				if _, err := bb.PublishInbound(ctx, m); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		b.Fatal("not all delivered")
	}
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msg/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
