package matrix

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/matrix/matrixtest"
)

// deliver sends m as the gateway does: on a *channel.RetryAfter it waits
// the homeserver's time and tries again.
func deliver(ctx context.Context, c *Channel, m bus.Outbound) error {
	for {
		_, err := c.Send(ctx, m)
		var ra *channel.RetryAfter
		if !errors.As(err, &ra) {
			return err
		}
		select {
		case <-time.After(ra.After):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// BenchmarkHundredRooms answers 100 rooms three times each against a
// homeserver that refuses each room's first send with 429
// M_LIMIT_EXCEEDED and retry_after_ms 1000: the round takes about one
// second (each room's own wait), not the hundred seconds of one queue for
// the homeserver.
func BenchmarkHundredRooms(b *testing.B) {
	fake, err := matrixtest.New(token)
	if err != nil {
		b.Fatal(err)
	}
	defer fake.Close()
	c, err := New(Config{AccessToken: token, Homeserver: fake.URL}, channel.Env{})
	if err != nil {
		b.Fatal(err)
	}
	const n, per = 100, 3
	rooms := make([]string, n)
	for i := range rooms {
		rooms[i] = fake.CreateRoom(fmt.Sprintf("@p%d:fake.test", i), matrixtest.RoomOptions{})
		fake.Join(rooms[i], fake.Bot)
	}
	ctx := context.Background()
	var lat []time.Duration
	var mu sync.Mutex
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		for _, r := range rooms {
			fake.Limit(r, 1, time.Second)
		}
		var wg sync.WaitGroup
		t0 := time.Now()
		for _, r := range rooms {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range per {
					if err := deliver(ctx, c, bus.Outbound{Kind: bus.Message, ChatID: r, Content: fmt.Sprintf("answer %d", k)}); err != nil {
						b.Error(err)
						return
					}
					mu.Lock()
					lat = append(lat, time.Since(t0))
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	elapsed := time.Since(start)
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	for _, r := range rooms {
		if got := len(fake.Sent(r)); got != per*b.N {
			b.Fatalf("room %s got %d messages, want %d", r, got, per*b.N)
		}
	}
	b.ReportMetric(float64(n*per*b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(lat[len(lat)*50/100].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Milliseconds()), "max-ms")
	b.ReportMetric(float64(fake.Calls("send")-n*per*b.N), "429s")
}
