package telegram

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/channeltest"
	"github.com/nbots/nb/gateway/channel/telegram/botapi"
	"github.com/nbots/nb/gateway/channel/telegram/telegramtest"
)

// deliver sends m as the gateway does: on a *channel.RetryAfter it waits
// the platform's time and tries again.
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

// chats makes n people write to the bot, so their chats exist.
func chats(fake *telegramtest.Server, n int) []string {
	ids := make([]string, n)
	for i := range n {
		u := botapi.User{ID: int64(1000 + i), FirstName: "p" + strconv.Itoa(i)}
		fake.Say(u, "hi")
		ids[i] = strconv.FormatInt(u.ID, 10)
	}
	return ids
}

// TestSlowChatDelaysNoOther: a chat whose every answer takes a second,
// and that is rate-limited, holds back none of twenty others.
func TestSlowChatDelaysNoOther(t *testing.T) {
	fake := newFake(t)
	c, _ := newChannel(t, fake, channel.Env{}, Config{})
	ids := chats(fake, 21)
	fake.SetChatDelay(1000, time.Second)
	fake.Inject("sendMessage", channeltest.TooMany)
	ctx := context.Background()
	slowDone := make(chan error, 1)
	go func() { slowDone <- deliver(ctx, c, bus.Outbound{Kind: bus.Message, ChatID: ids[0], Content: "slow"}) }()
	// The slow chat's first request has its 429: it waits now.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := fake.WaitCalls(wctx, "sendMessage", 1); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	var wg sync.WaitGroup
	for _, id := range ids[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := deliver(ctx, c, bus.Outbound{Kind: bus.Message, ChatID: id, Content: "fast"}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	// The slow chat needs two seconds (its 429's retry_after, then its
	// answer's delay); the others must not wait for any of it.
	if d := time.Since(t0); d > time.Second {
		t.Errorf("twenty chats took %s beside a slow one", d)
	}
	if err := <-slowDone; err != nil {
		t.Error(err)
	}
}

// BenchmarkHundredChats answers 100 chats three times each against a
// fake that allows one message per second per chat (Telegram's rule):
// the round takes about two seconds (each chat's own limit), not the
// hundred seconds of one queue per platform.
func BenchmarkHundredChats(b *testing.B) {
	fake, err := telegramtest.New(token)
	if err != nil {
		b.Fatal(err)
	}
	defer fake.Close()
	c, err := New(Config{Token: token, APIBase: fake.URL}, channel.Env{})
	if err != nil {
		b.Fatal(err)
	}
	const n, per = 100, 3
	ids := chats(fake, n)
	fake.SetChatInterval(time.Second)
	ctx := context.Background()
	var lat []time.Duration
	var mu sync.Mutex
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		var wg sync.WaitGroup
		t0 := time.Now()
		for _, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range per {
					if err := deliver(ctx, c, bus.Outbound{Kind: bus.Message, ChatID: id, Content: fmt.Sprintf("answer %d", k)}); err != nil {
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
	for _, id := range ids {
		chat, _ := strconv.ParseInt(id, 10, 64)
		if got := len(fake.Sent(chat)); got != per*b.N {
			b.Fatalf("chat %s got %d messages, want %d", id, got, per*b.N)
		}
	}
	b.ReportMetric(float64(n*per*b.N)/elapsed.Seconds(), "msgs/s")
	b.ReportMetric(float64(lat[len(lat)*50/100].Milliseconds()), "p50-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Milliseconds()), "max-ms")
	b.ReportMetric(float64(fake.Calls("sendMessage")-n*per*b.N), "429s")
}
