package gateway

import (
	"context"
	"errors"
	"fmt"
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

// TestReadyGrace: one failed poll of a connected channel leaves the
// gateway ready; failing for ReadyGrace makes it unready, connecting
// again ready. A channel that never connected is unready at once.
func TestReadyGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		g := &Gateway{}
		tg, dc := &linkChannel{name: "telegram"}, &linkChannel{name: "discord"}
		g.Expect("telegram")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go g.RunChannel(ctx, tg)
		synctest.Wait()
		ready := func(want bool, state string) {
			t.Helper()
			ok, got := g.Ready()
			if ok != want || got["telegram"] != state {
				t.Fatalf("at %v: Ready = %v %v, want %v with telegram %q", time.Since(start), ok, got, want, state)
			}
			// What the connected gauge reads: no grace.
			for _, st := range g.Channels() {
				if st.Name == "telegram" && st.Receiving() != (state == "connected") {
					t.Fatalf("at %v: Receiving = %v in state %q", time.Since(start), st.Receiving(), state)
				}
			}
		}
		tg.conn.Up()
		ready(true, "connected")
		tg.conn.Down(errors.New("getUpdates: 502 Bad Gateway"))
		ready(true, "connecting: getUpdates: 502 Bad Gateway")
		time.Sleep(ReadyGrace - time.Second)
		tg.conn.Down(errors.New("getUpdates: 503 Service Unavailable")) // a second failure: the grace runs from the first
		ready(true, "connecting: getUpdates: 503 Service Unavailable")
		time.Sleep(time.Second)
		ready(false, "connecting: getUpdates: 503 Service Unavailable")
		tg.conn.Up()
		ready(true, "connected")
		tg.conn.Down(errors.New("getUpdates: 502 Bad Gateway")) // a new loss: a new grace
		ready(true, "connecting: getUpdates: 502 Bad Gateway")

		// A channel that never connected is not ready, failing or not.
		g.Expect("discord")
		go g.RunChannel(ctx, dc)
		synctest.Wait()
		dc.conn.Down(errors.New("gateway: 401 Unauthorized"))
		if ok, got := g.Ready(); ok || got["discord"] != "connecting: gateway: 401 Unauthorized" {
			t.Errorf("a channel that never connected: Ready = %v %v", ok, got)
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

// TestContextsBounded: /status's last request size is remembered for the
// sessions of the last maxContexts turns at least, and for 2×maxContexts
// sessions at most, however many chats the gateway talked with.
func TestContextsBounded(t *testing.T) {
	g := &Gateway{}
	for i := range 10 * maxContexts {
		g.noteContext(fmt.Sprint("web:", i), i, 100_000)
		g.noteContext("web:busy", i, 100_000) // a chat that talks all the time
	}
	if n := len(g.contexts) + len(g.contextsOld); n > 2*maxContexts {
		t.Fatalf("%d sessions remembered, want %d at most", n, 2*maxContexts)
	}
	for i := 10*maxContexts - maxContexts/2; i < 10*maxContexts; i++ {
		if c, ok := g.contextLocked(fmt.Sprint("web:", i)); !ok || c != [2]int{i, 100_000} {
			t.Fatalf("session %d: %v %v, want its last request", i, c, ok)
		}
	}
	if c, ok := g.contextLocked("web:busy"); !ok || c[0] != 10*maxContexts-1 {
		t.Fatalf("the busy chat: %v %v, want its last request", c, ok)
	}
	if _, ok := g.contextLocked("web:0"); ok {
		t.Fatal("the first chat, ten thousand chats ago, is still remembered")
	}
}
