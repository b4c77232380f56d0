package gateway

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
)

// linkChannel is a channel whose connection the test moves.
type linkChannel struct {
	name string
	conn channel.Conn
}

func (c *linkChannel) Name() string                       { return c.name }
func (c *linkChannel) Capabilities() channel.Capabilities { return channel.Capabilities{} }
func (c *linkChannel) Run(ctx context.Context, _ channel.Inbox, ready func()) error {
	<-ctx.Done()
	return nil
}
func (c *linkChannel) Send(context.Context, bus.Outbound) (string, error) { return "", nil }
func (c *linkChannel) Status() channel.Status                             { return c.conn.Status() }

// TestChannelStates: a channel is connecting until it says it
// connected, connecting with why when it loses its connection; a
// channel that cannot run is stopped, one switched off disabled; only
// connected, standby and disabled channels are ready.
func TestChannelStates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &Gateway{}
		tg := &linkChannel{name: "telegram"}
		g.Expect("telegram", "whatsapp", "slack")
		g.Disabled("email")
		g.Connected("whatsapp", errors.New("this nb has no such channel"))
		g.Standby("slack")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go g.RunChannel(ctx, tg)
		synctest.Wait()
		want := func(ready bool, states map[string]string) {
			t.Helper()
			ok, got := g.Ready()
			if ok != ready || len(got) != len(states) {
				t.Fatalf("Ready = %v %v, want %v %v", ok, got, ready, states)
			}
			for k, v := range states {
				if got[k] != v {
					t.Errorf("%s: %q, want %q", k, got[k], v)
				}
			}
		}
		want(false, map[string]string{"telegram": "connecting", "whatsapp": "stopped: this nb has no such channel", "slack": "standby: another replica receives", "email": "disabled"})
		tg.conn.Up()
		want(false, map[string]string{"telegram": "connected", "whatsapp": "stopped: this nb has no such channel", "slack": "standby: another replica receives", "email": "disabled"})
		tg.conn.Down(errors.New("getUpdates: 502 Bad Gateway"))
		want(false, map[string]string{"telegram": "connecting: getUpdates: 502 Bad Gateway", "whatsapp": "stopped: this nb has no such channel", "slack": "standby: another replica receives", "email": "disabled"})

		g2 := &Gateway{}
		g2.Expect("telegram")
		g2.Disabled("email")
		go g2.RunChannel(ctx, tg)
		synctest.Wait()
		tg.conn.Up()
		if ok, got := g2.Ready(); !ok || got["telegram"] != "connected" || got["email"] != "disabled" {
			t.Errorf("Ready = %v %v, want ready", ok, got)
		}
	})
}

// TestStatusFile: a running gateway keeps its channels' states in the
// status file, rewritten when they change; stopped, it leaves none, and
// a file left by a crash is told apart by its lock.
func TestStatusFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "status.json")
	if _, running, err := ReadStatus(path); running || err != nil {
		t.Fatal(running, err)
	}
	g := &Gateway{}
	tg := &linkChannel{name: "telegram"}
	g.Expect("telegram")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go g.RunChannel(ctx, tg)
	done := make(chan error, 1)
	go func() { done <- g.KeepStatus(ctx, path) }()
	read := func(state string) StatusFile {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			f, running, err := ReadStatus(path)
			if err != nil {
				t.Fatal(err)
			}
			if running && len(f.Channels) == 1 && f.Channels[0].State == state {
				return f
			}
			if time.Now().After(deadline) {
				t.Fatalf("status file: running %v, %+v; want telegram %s", running, f, state)
			}
		}
	}
	read("connecting")
	tg.conn.Up()
	f := read("connected")
	if f.Channels[0].Name != "telegram" || f.Channels[0].Since.IsZero() || f.PID == 0 {
		t.Errorf("%+v", f)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, running, err := ReadStatus(path); running || err != nil {
		t.Errorf("after the stop: running %v, %v", running, err)
	}
}
