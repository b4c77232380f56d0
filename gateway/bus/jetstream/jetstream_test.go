package jetstream_test

import (
	"context"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/bus/bustest"
	"github.com/nbots/nb/gateway/bus/jetstream"
	"github.com/nbots/nb/internal/natstest"
)

func dial(t *testing.T, url string, opt jetstream.Options) *jetstream.Bus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := jetstream.Dial(ctx, url, "test", opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestConformance(t *testing.T) {
	s := natstest.Start(t)
	n := 0
	bustest.Run(t, func(t *testing.T) bus.Bus {
		n++
		// A namespace per test: a fresh, empty bus on the same server.
		return dial(t, s.URL(), jetstream.Options{Namespace: "t" + string(rune('a'+n)), Retry: time.Millisecond, AckWait: time.Second})
	})
}

// The server module serves the tests only: nb links the client alone.
func TestServerNotLinked(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/nbots/nb/cmd/nb").CombinedOutput()
	if err != nil {
		t.Skipf("go list: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "github.com/nats-io/nats.go/jetstream") {
		t.Fatal("nb does not link the NATS client: is the bus wired?")
	}
	if strings.Contains(string(out), "nats-server") {
		t.Fatal("nb links github.com/nats-io/nats-server: only tests may import it")
	}
}

func TestParseURLAndRedact(t *testing.T) {
	for _, c := range []struct{ in, redacted string }{
		{"nats://alice:s3cret@127.0.0.1:4222", "nats://alice:xxxxx@127.0.0.1:4222"},
		{"nats://s3cret-token@127.0.0.1:4222?namespace=team", "nats://xxxxx@127.0.0.1:4222?namespace=team"},
		{"nats://127.0.0.1:4222,nats://bob:pw@127.0.0.1:4223", "nats://127.0.0.1:4222,nats://bob:xxxxx@127.0.0.1:4223"},
		{"tls://127.0.0.1:4222", "tls://127.0.0.1:4222"},
	} {
		if got := jetstream.Redact(c.in); got != c.redacted {
			t.Errorf("Redact(%q) = %q, want %q", c.in, got, c.redacted)
		}
	}
	server, opt, err := jetstream.ParseURL("nats://u:p@127.0.0.1:4222?namespace=team&partitions=8")
	if err != nil || server != "nats://u:p@127.0.0.1:4222" || opt.Namespace != "team" || opt.Partitions != 8 {
		t.Fatal(server, opt, err)
	}
	for _, bad := range []string{"http://u:topsecret@127.0.0.1:1", "nats://u:topsecret@127.0.0.1:1?partitions=0", "nats://u:topsecret@127.0.0.1:1?colour=red"} {
		_, _, err := jetstream.ParseURL(bad)
		if err == nil || strings.Contains(err.Error(), "topsecret") {
			t.Errorf("ParseURL(%q): %v", bad, err)
		}
	}
}

// An unreachable bus is named, without its password.
func TestDialUnreachable(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := jetstream.Dial(ctx, "nats://u:topsecret@127.0.0.1:1", "test", jetstream.Options{})
	if err == nil || !strings.Contains(err.Error(), "nats://u:xxxxx@127.0.0.1:1") || strings.Contains(err.Error(), "topsecret") {
		t.Fatal(err)
	}
}

// Check fails while the server is away and passes when it is back; the
// bus keeps its queued messages across the restart, and a running
// consumer takes messages published after it.
func TestCheckAcrossRestart(t *testing.T) {
	s := natstest.Start(t)
	running := dial(t, s.URL(), jetstream.Options{Namespace: "running"})
	idle := dial(t, s.URL(), jetstream.Options{Namespace: "idle"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := running.Check(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan bus.Inbound, 4)
	go running.Inbound(ctx, func(ctx context.Context, m bus.Inbound) error { got <- m; return nil }) //nolint:errcheck // ends with ctx
	receive := func(want string) {
		t.Helper()
		select {
		case m := <-got:
			if m.Content != want {
				t.Fatalf("got %q, want %q", m.Content, want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("%q not delivered", want)
		}
	}
	if _, err := running.PublishInbound(ctx, bus.Inbound{Channel: "telegram", ID: "1", ChatID: "1", Content: "before"}); err != nil {
		t.Fatal(err)
	}
	receive("before")
	if _, err := idle.PublishInbound(ctx, bus.Inbound{Channel: "telegram", ID: "1", ChatID: "1", Content: "kept"}); err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	s.WaitForShutdown()
	deadline := time.Now().Add(5 * time.Second)
	for running.Check(ctx) == nil {
		if time.Now().After(deadline) {
			t.Fatal("Check passes with the server down")
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.Restart(t)
	for err := running.Check(ctx); err != nil; err = running.Check(ctx) {
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatal("Check still fails after the restart:", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := running.PublishInbound(ctx, bus.Inbound{Channel: "telegram", ID: "2", ChatID: "1", Content: "after"}); err != nil {
		t.Fatal(err)
	}
	receive("after")
	go idle.Inbound(ctx, func(ctx context.Context, m bus.Inbound) error { got <- m; return nil }) //nolint:errcheck // ends with ctx
	receive("kept")
}

// A handler that runs longer than AckWait keeps its message: the
// in-progress beat stops the server from giving it to another replica.
func TestLongHandlerNotRedelivered(t *testing.T) {
	s := natstest.Start(t)
	b := dial(t, s.URL(), jetstream.Options{Namespace: "long", AckWait: 600 * time.Millisecond})
	other := dial(t, s.URL(), jetstream.Options{Namespace: "long", AckWait: 600 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var deliveries atomic.Int32
	done := make(chan struct{}, 2)
	handler := func(ctx context.Context, m bus.Inbound) error {
		deliveries.Add(1)
		time.Sleep(2 * time.Second)
		done <- struct{}{}
		return nil
	}
	go b.Inbound(ctx, handler)     //nolint:errcheck // ends with ctx
	go other.Inbound(ctx, handler) //nolint:errcheck // ends with ctx
	if _, err := b.PublishInbound(ctx, bus.Inbound{Channel: "telegram", ID: "1", ChatID: "1", Content: "long"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("not delivered")
	}
	time.Sleep(time.Second)
	if n := deliveries.Load(); n != 1 {
		t.Fatalf("delivered %d times", n)
	}
}
