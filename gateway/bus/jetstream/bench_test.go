package jetstream_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/bus/jetstream"
	"github.com/nbots/nb/internal/natstest"
)

// The figures of bench/README.md's "Scale-out: gateway on JetStream":
//
//	go test -run XXX -bench Inbound -benchtime 20000x ./gateway/bus/jetstream
//
// One node: the NATS server (file storage) and one replica in this
// process, messages over 1,000 sessions, an instant handler.

// BenchmarkInbound publishes as fast as 32 publishers (channels' receive
// loops, webhook requests) can, each waiting for its message to be
// durable: msg/s from the first publish to the last dispatch, and the
// CPU time a message costs this process, server included (cpu-µs/msg),
// which does not depend on what else the machine runs.
func BenchmarkInbound(b *testing.B) {
	inbound(b, 32, 0)
}

// BenchmarkInboundPaced publishes 2,000 msg/s (4 publishers at 500 msg/s
// each): p50 and p99 from publish to dispatch below saturation.
func BenchmarkInboundPaced(b *testing.B) {
	inbound(b, 4, 2*time.Millisecond)
}

// BenchmarkInboundGoalRate publishes at the goal, 10,000 msg/s
// (20 publishers at 500 msg/s each): whether one node keeps up with it
// durably, and p50 and p99 from publish to dispatch at that rate.
func BenchmarkInboundGoalRate(b *testing.B) {
	inbound(b, 20, 2*time.Millisecond)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru) //nolint:errcheck // never fails
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func inbound(b *testing.B, publishers int, every time.Duration) {
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
	time.Sleep(500 * time.Millisecond) // the consumers are created
	b.ResetTimer()
	cpu0 := cpuTime()
	start := time.Now()
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			next := time.Now()
			for i := p; i < b.N; i += publishers {
				if every > 0 {
					next = next.Add(every)
					time.Sleep(time.Until(next))
				}
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
	cpu := cpuTime() - cpu0
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "msg/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/msg")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
