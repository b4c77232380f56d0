package jetstream_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus/jetstream"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/internal/natstest"
	"github.com/nbots/nb/internal/testbuf"
)

// fileCursor is a replica's own position file, in its own state folder.
func fileCursor(t *testing.T, saved string) channel.FileCursor {
	t.Helper()
	c, err := channel.Env{StateDir: t.TempDir()}.FileCursor("telegram")
	if err != nil {
		t.Fatal(err)
	}
	if saved != "" {
		if err := c.Save(t.Context(), saved); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

func positions(t *testing.T, url, id string, log *slog.Logger) *jetstream.Positions {
	t.Helper()
	b := dial(t, url, jetstream.Options{Namespace: "pos", Log: log})
	p, err := b.Positions(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func load(t *testing.T, c channel.Cursor) string {
	t.Helper()
	s, err := c.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Two replicas with their own state folders: a position saved by one is
// where the other resumes; the one that lost the receive loop cannot
// move it back; the files are not what counts once the bus has it.
func TestPositionsShared(t *testing.T) {
	s := natstest.Start(t)
	ctx := context.Background()
	a := positions(t, s.URL(), "replica-a", nil)
	b := positions(t, s.URL(), "replica-b", nil)
	const key = "telegram.0123abcd"

	ca, err := a.Open(ctx, key, fileCursor(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	if got := load(t, ca); got != "" {
		t.Fatalf("a fresh position is %q", got)
	}
	for _, pos := range []string{"100101", "100102", "100105"} {
		if err := ca.Save(t.Context(), pos); err != nil {
			t.Fatal(err)
		}
	}
	// b is elected; its own file is stale (it received long ago).
	cb, err := b.Open(ctx, key, fileCursor(t, "99000"))
	if err != nil {
		t.Fatal(err)
	}
	if got := load(t, cb); got != "100105" {
		t.Fatalf("b resumes from %q, want a's 100105", got)
	}
	// a has lost its election but does not know yet: its save is refused.
	err = ca.Save(t.Context(), "100106")
	if !errors.Is(err, channel.ErrPositionTaken) {
		t.Fatalf("a stale receive loop saved: %v", err)
	}
	if !strings.Contains(err.Error(), key) {
		t.Fatalf("the error does not name the position: %v", err)
	}
	if err := cb.Save(t.Context(), "100104"); err != nil { // b replays a little: its save is the one that counts
		t.Fatal(err)
	}
	if err := ca.Save(t.Context(), "100200"); !errors.Is(err, channel.ErrPositionTaken) {
		t.Fatalf("a stale receive loop saved: %v", err)
	}
	// a is elected again later: it resumes from b's position.
	ca2, err := a.Open(ctx, key, fileCursor(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	if got := load(t, ca2); got != "100104" {
		t.Fatalf("a resumes from %q, want b's 100104", got)
	}
	if err := cb.Save(t.Context(), "100110"); !errors.Is(err, channel.ErrPositionTaken) {
		t.Fatalf("b, no longer elected, saved: %v", err)
	}
	// Another account's position is another key.
	other, err := a.Open(ctx, "telegram.ffff0000", fileCursor(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	if got := load(t, other); got != "" {
		t.Fatalf("another account starts from %q", got)
	}
	if !strings.Contains(ca2.String(), "pos_positions") {
		t.Fatalf("String() = %q", ca2.String())
	}
}

// A gateway that kept its position in a file moves to the bus without
// losing it: the first replica to open the position starts from its
// file's, once; the others' files no longer count.
func TestPositionsMigrateFromFile(t *testing.T) {
	s := natstest.Start(t)
	ctx := context.Background()
	log := &testbuf.Buffer{}
	a := positions(t, s.URL(), "replica-a", slog.New(slog.NewTextHandler(log, nil)))
	b := positions(t, s.URL(), "replica-b", nil)
	const key = "email.42aa"
	ca, err := a.Open(ctx, key, fileCursor(t, "1700000000:812"))
	if err != nil {
		t.Fatal(err)
	}
	if got := load(t, ca); got != "1700000000:812" {
		t.Fatalf("migrated %q", got)
	}
	if !strings.Contains(log.String(), "starting from the file's") || !strings.Contains(log.String(), key) {
		t.Fatalf("the migration is not in the log:\n%s", log)
	}
	cb, err := b.Open(ctx, key, fileCursor(t, "1700000000:3"))
	if err != nil {
		t.Fatal(err)
	}
	if got := load(t, cb); got != "1700000000:812" {
		t.Fatalf("b took %q, want the bus's", got)
	}
	// Opening concurrently: each open takes the position over in turn,
	// and only the last opener's saves succeed.
	done := make(chan channel.Cursor, 4)
	for range 4 {
		go func() {
			c, err := b.Open(ctx, key, fileCursor(t, ""))
			if err != nil {
				t.Error(err)
			}
			done <- c
		}()
	}
	ok := 0
	var opened []channel.Cursor
	for range 4 {
		opened = append(opened, <-done)
	}
	time.Sleep(10 * time.Millisecond)
	for _, c := range opened {
		if c != nil && c.Save(t.Context(), "1700000000:900") == nil {
			ok++
		}
	}
	if ok != 1 {
		t.Fatalf("%d of 4 concurrent openers could save, want 1", ok)
	}
}

// BenchmarkPositionSave is what a receive loop pays per message to save
// its position: on the bus (a KV update at a revision, acknowledged once
// stored) and, for comparison, in a file (written, synced, renamed).
func BenchmarkPositionSave(b *testing.B) {
	b.Run("bus", func(b *testing.B) {
		s := natstest.Start(b)
		bus, err := jetstream.Dial(context.Background(), s.URL(), "bench", jetstream.Options{Namespace: "bench"})
		if err != nil {
			b.Fatal(err)
		}
		defer bus.Close()
		p, err := bus.Positions(context.Background(), "bench")
		if err != nil {
			b.Fatal(err)
		}
		file, _ := channel.Env{StateDir: b.TempDir()}.FileCursor("telegram")
		c, err := p.Open(context.Background(), "telegram.bench", file)
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; b.Loop(); i++ {
			if err := c.Save(b.Context(), strconv.Itoa(100000+i)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("file", func(b *testing.B) {
		c, _ := channel.Env{StateDir: b.TempDir()}.FileCursor("telegram")
		for i := 0; b.Loop(); i++ {
			if err := c.Save(b.Context(), strconv.Itoa(100000+i)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// A receive loop elected while the bus is away waits for it to open its
// position, and gives up when its context ends.
func TestPositionsOpenWaitsForTheBus(t *testing.T) {
	s := natstest.Start(t)
	a := positions(t, s.URL(), "replica-a", nil)
	s.Shutdown()
	s.WaitForShutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	_, err := a.Open(ctx, "telegram.0123abcd", fileCursor(t, "100"))
	cancel()
	if err == nil {
		t.Fatal("opened without a bus")
	}
	restarted := make(chan bool)
	go func() {
		time.Sleep(500 * time.Millisecond)
		s.Restart(t)
		close(restarted)
	}()
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := a.Open(ctx, "telegram.0123abcd", fileCursor(t, "100"))
	<-restarted
	if err != nil {
		t.Fatal(err)
	}
	if got := load(t, c); got != "100" {
		t.Fatalf("opened at %q", got)
	}
}
