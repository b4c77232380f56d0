package keylock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// One holder a key at a time; other keys are free; a waiter gives up
// with its context; the keys leave the map when nobody holds or waits.
func TestLock(t *testing.T) {
	var m Map[string]
	ctx := context.Background()
	unlockA, err := m.Lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	unlockB, err := m.Lock(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := m.Lock(short, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a held: %v, want the context's end", err)
	}
	got := make(chan struct{})
	go func() {
		unlock, err := m.Lock(ctx, "a")
		if err == nil {
			unlock()
		}
		close(got)
	}()
	unlockA()
	<-got
	unlockB()
	if n := m.Len(); n != 0 {
		t.Errorf("%d keys left, want 0", n)
	}
}
