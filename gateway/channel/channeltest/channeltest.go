// Package channeltest helps test chat channels: an Inbox that records
// what a channel publishes and can refuse it for a while; what every
// platform's fake (telegramtest, slacktest, …) shares, a Loopback server
// with its request log and Faults injected per endpoint; and Conformance,
// the suite every channel.Channel passes through its fake.
package channeltest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/internal/testbuf"
)

// Inbox records published messages. Its zero value is ready.
type Inbox struct {
	// Admit says whose media the channel may download (see
	// channel.Admitter); nil admits everyone.
	Admit func(bus.Inbound) bool

	mu       sync.Mutex
	got      []bus.Inbound
	failing  int
	attempts int
	changed  chan struct{}
}

// Refuse makes the next n publishes fail (n < 0: all until Refuse(0)).
func (b *Inbox) Refuse(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failing = n
}

// Admits implements channel.Admitter.
func (b *Inbox) Admits(m bus.Inbound) bool { return b.Admit == nil || b.Admit(m) }

// Publish records m, unless refusing.
func (b *Inbox) Publish(_ context.Context, m bus.Inbound) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.attempts++
	defer b.notifyLocked()
	if b.failing != 0 {
		if b.failing > 0 {
			b.failing--
		}
		return errors.New("bus unavailable")
	}
	b.got = append(b.got, m)
	return nil
}

func (b *Inbox) notifyLocked() {
	if b.changed != nil {
		close(b.changed)
		b.changed = nil
	}
}

// Attempts is how many times Publish was called, refused calls included.
func (b *Inbox) Attempts() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.attempts
}

// WaitAttempts waits until Publish was called n times, refused calls
// included; it fails the test after 20 s.
func (b *Inbox) WaitAttempts(t testing.TB, n int) {
	t.Helper()
	b.waitUntil(t, func() bool { return b.attempts >= n }, func() string {
		return fmt.Sprintf("%d of %d publishes", b.Attempts(), n)
	})
}

// waitUntil waits until done, called with b.mu held, reports true.
func (b *Inbox) waitUntil(t testing.TB, done func() bool, what func() string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		b.mu.Lock()
		ok := done()
		if !ok && b.changed == nil {
			b.changed = make(chan struct{})
		}
		ch := b.changed
		b.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatal(what())
		}
	}
}

// Messages are all the messages published, in order.
func (b *Inbox) Messages() []bus.Inbound {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]bus.Inbound(nil), b.got...)
}

// Unique are the messages the bus would keep: the first of each ID.
func (b *Inbox) Unique() []bus.Inbound { return unique(b.Messages()) }

func unique(ms []bus.Inbound) []bus.Inbound {
	seen := map[string]bool{}
	var out []bus.Inbound
	for _, m := range ms {
		if m.ID == "" || !seen[m.ID] {
			seen[m.ID] = true
			out = append(out, m)
		}
	}
	return out
}

// Wait waits until n distinct messages were published and returns them;
// it fails the test after 20 s.
func (b *Inbox) Wait(t testing.TB, n int) []bus.Inbound {
	t.Helper()
	b.waitUntil(t, func() bool { return len(unique(b.got)) >= n }, func() string {
		return fmt.Sprintf("received %d of %d messages", len(b.Unique()), n)
	})
	return b.Unique()
}

// Start runs c with in until the test ends, waits until it is ready (or
// fails the test), and returns a stop function that ends Run and checks
// it returned nil; the test's cleanup calls it too.
func Start(t testing.TB, c channel.Channel, in channel.Inbox) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	ready := make(chan struct{})
	go func() { errc <- c.Run(ctx, in, func() { close(ready) }) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-errc:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("Run did not return after its context ended")
			}
		})
	}
	t.Cleanup(stop)
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("Run: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("not ready")
	}
	return stop
}

// Send sends m through c (as a final Message unless m says otherwise) and
// fails the test on an error.
func Send(t testing.TB, c channel.Channel, m bus.Outbound) string {
	t.Helper()
	if m.Kind == "" {
		m.Kind = bus.Message
	}
	if m.Channel == "" {
		m.Channel = c.Name()
	}
	id, err := c.Send(context.Background(), m)
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	return id
}

// Logger is a debug logger into a buffer the test can read; when the test
// ends it fails the test if any of secrets was written there.
func Logger(t testing.TB, secrets ...string) (*slog.Logger, *testbuf.Buffer) {
	t.Helper()
	buf := &testbuf.Buffer{}
	t.Cleanup(func() {
		for _, s := range secrets {
			if strings.Contains(buf.String(), s) {
				t.Errorf("the secret %q is in the logs:\n%s", s[:min(len(s), 4)]+"…", buf)
			}
		}
	})
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// Folders gives env a fresh workspace and state folder where it has none.
func Folders(t testing.TB, env channel.Env) channel.Env {
	t.Helper()
	if env.Workspace == "" {
		env.Workspace = t.TempDir()
	}
	if env.StateDir == "" {
		env.StateDir = t.TempDir()
	}
	return env
}

// CheckStatus checks what c, running, reports of its connection:
// connected once it receives, and, after cut stops the platform,
// connecting with the failure as the reason.
func CheckStatus(t testing.TB, c channel.Channel, cut func()) {
	t.Helper()
	WaitStatus(t, c, channel.Connected)
	cut()
	if st := WaitStatus(t, c, channel.Connecting); st.Reason == "" {
		t.Errorf("connecting again without a reason: %+v", st)
	}
}

// WaitStatus waits up to ten seconds for c, a channel.Reporter, to
// report state, and returns its status.
func WaitStatus(t testing.TB, c channel.Channel, state channel.Connection) channel.Status {
	t.Helper()
	r, ok := c.(channel.Reporter)
	if !ok {
		t.Fatalf("%s does not report its connection (channel.Reporter)", c.Name())
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := r.Status()
		if st.State == state {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: status %+v, want %s", c.Name(), st, state)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
