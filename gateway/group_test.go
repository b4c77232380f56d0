package gateway

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/access"
	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/dispatch"
	"github.com/nbots/nb/gateway/replica"
	"github.com/nbots/nb/gateway/session"
	"github.com/nbots/nb/internal/rungroup"
)

// groupChannel is a channel that runs until its context ends, or fails
// once connected when fail is set.
type groupChannel struct {
	name string
	fail error
}

func (c groupChannel) Name() string                       { return c.name }
func (c groupChannel) Capabilities() channel.Capabilities { return channel.Capabilities{} }
func (c groupChannel) Send(context.Context, bus.Outbound) (string, error) {
	return "", nil
}

func (c groupChannel) Run(ctx context.Context, _ channel.Inbox, ready func()) error {
	ready()
	if c.fail != nil {
		return c.fail
	}
	<-ctx.Done()
	return nil
}

// failingOutbound is a bus whose outbound queue cannot be read.
type failingOutbound struct{ bus.Bus }

func (failingOutbound) Outbound(context.Context, string, func(context.Context, bus.Outbound) error) error {
	return errors.New("outbound queue: connection refused")
}

// runGroup runs a gateway's loop, a dispatcher and the channels in one
// run group as nb gateway does, and returns what Wait returned.
func runGroup(t *testing.T, b bus.Bus, chs ...channel.Channel) error {
	t.Helper()
	dir := t.TempDir()
	sm, err := session.NewManager(dir + "/sessions")
	if err != nil {
		t.Fatal(err)
	}
	defer sm.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	g := &Gateway{Bus: b, Sessions: sm, Runner: &echoRunner{}, Log: log, Access: &access.Checker{Pairings: &access.FilePairings{Path: dir + "/pairing.json"}}}
	g.Alone()
	d := &dispatch.Dispatcher{Bus: b, Channels: chs, Log: log, Delivered: &replica.Local{}}
	group := rungroup.New(context.Background())
	group.Go("the gateway", g.Run)
	group.Go("the dispatcher", d.Run)
	for _, ch := range chs {
		group.Go("channel "+ch.Name(), func(ctx context.Context) error { return g.RunChannel(ctx, ch) })
	}
	done := make(chan error, 1)
	go func() { done <- group.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the group did not stop when a part failed")
		return nil
	}
}

// settled waits for the goroutine count to come back to base.
func settled(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestGroupStopsWhenAChannelFails: a channel's final error stops the
// gateway's loop, the dispatcher and the other channels, and is what the
// group returns, named; no goroutine is left behind.
func TestGroupStopsWhenAChannelFails(t *testing.T) {
	base := runtime.NumGoroutine()
	b := bus.NewLocal()
	err := runGroup(t, b, groupChannel{name: "web"}, groupChannel{name: "telegram", fail: errors.New("the bot token was revoked")})
	b.Close()
	if err == nil || !strings.Contains(err.Error(), "channel telegram: the bot token was revoked") {
		t.Errorf("err = %v, want the failing channel's", err)
	}
	settled(t, base)
}

// TestGroupStopsWhenTheDispatcherFails: the dispatcher's failure stops
// the rest and is returned.
func TestGroupStopsWhenTheDispatcherFails(t *testing.T) {
	base := runtime.NumGoroutine()
	b := bus.NewLocal()
	err := runGroup(t, failingOutbound{b}, groupChannel{name: "web"})
	b.Close()
	if err == nil || !strings.Contains(err.Error(), "the dispatcher: outbound queue: connection refused") {
		t.Errorf("err = %v, want the dispatcher's", err)
	}
	settled(t, base)
}
