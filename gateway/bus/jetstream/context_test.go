package jetstream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/access"
	"github.com/nbots/nb/internal/natstest"
)

// The callers' contexts reach the server: a receive position and the
// pairing book, opened, saved or changed with a context already
// cancelled, fail with its error and change nothing.
func TestContextCancelled(t *testing.T) {
	s := natstest.Start(t)
	a := positions(t, s.URL(), "replica-a", nil)
	const key = "telegram.0123abcd"
	c, err := a.Open(t.Context(), key, fileCursor(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Save(t.Context(), "100"); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	if err := c.Save(cancelled, "200"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Save with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := a.Open(cancelled, key, fileCursor(t, "")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Open with a cancelled context: %v, want context.Canceled", err)
	}
	b := positions(t, s.URL(), "replica-b", nil)
	o, err := b.Open(t.Context(), key, fileCursor(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	if got := load(t, o); got != "100" {
		t.Fatalf("the position is %q after a cancelled Save, want 100", got)
	}

	checker, p := replicaChecker(t, s.URL())
	if _, err := p.Update(cancelled, func(b *access.Book) {
		b.Approved = append(b.Approved, access.Approval{Channel: "slack", SenderID: "U1"})
	}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Update with a cancelled context: %v, want context.Canceled", err)
	}
	eve := access.Request{Entry: access.Channel, Channel: "telegram", SenderID: "333|eve", ChatID: "333"}
	if d := checker.Authorize(cancelled, eve); d.Verdict != access.Deny {
		t.Fatalf("a stranger's code given with a cancelled context: %+v, want a denial (the store not reached)", d)
	}
	_, other := replicaChecker(t, s.URL())
	if book := other.Read(); len(book.Approved)+len(book.Pending) != 0 {
		t.Fatalf("the book after cancelled changes: %+v, want it empty", book)
	}
}

// A deadline reaches the server: with the server gone, a Save and an
// Update return when their context's deadline passes, not after the
// bus's own bound.
func TestContextDeadline(t *testing.T) {
	s := natstest.Start(t)
	a := positions(t, s.URL(), "replica-a", nil)
	c, err := a.Open(t.Context(), "telegram.0123abcd", fileCursor(t, ""))
	if err != nil {
		t.Fatal(err)
	}
	_, p := replicaChecker(t, s.URL())
	s.Shutdown()
	s.WaitForShutdown()
	for name, call := range map[string]func(context.Context) error{
		"Save": func(ctx context.Context) error { return c.Save(ctx, "300") },
		"Update": func(ctx context.Context) error {
			_, err := p.Update(ctx, func(*access.Book) {})
			return err
		},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		start := time.Now()
		err := call(ctx)
		cancel()
		if err == nil {
			t.Fatalf("%s without a server succeeded", name)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("%s returned after %v, its deadline 300ms", name, d)
		}
	}
}
