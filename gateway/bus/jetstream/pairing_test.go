package jetstream_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/access"
	"github.com/nbots/nb/gateway/bus/jetstream"
	"github.com/nbots/nb/internal/natstest"
)

// replicaChecker is a replica's access checker: its own state folder's
// file, and the bus's pairing store.
func replicaChecker(t *testing.T, url string) (*access.Checker, *jetstream.Pairings) {
	t.Helper()
	b := dial(t, url, jetstream.Options{Namespace: "pair"})
	p, err := b.Pairings(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return &access.Checker{
		Pairings: p,
		Channels: map[string]access.ChannelRules{"telegram": {AllowFrom: []string{"111"}}},
	}, p
}

// A code given by one replica is approved on another, and the approval
// is honoured by the first within moments.
func TestPairingShared(t *testing.T) {
	s := natstest.Start(t)
	a, _ := replicaChecker(t, s.URL())
	b, _ := replicaChecker(t, s.URL())
	eve := access.Request{Entry: access.Channel, Channel: "telegram", SenderID: "333|eve", ChatID: "333"}
	d := a.Authorize(t.Context(), eve)
	if d.Verdict != access.Pair || !d.NewCode {
		t.Fatalf("%+v", d)
	}
	// Another replica handles eve's next message: the same code, not a
	// new one.
	if d2 := b.Authorize(t.Context(), eve); d2.Verdict != access.Pair || d2.Code != d.Code || d2.NewCode {
		t.Fatalf("b: %+v, a gave %s", d2, d.Code)
	}
	approved := time.Now()
	if _, err := b.Approve(t.Context(), d.Code); err != nil {
		t.Fatal(err)
	}
	for a.Authorize(t.Context(), eve).Verdict != access.Allow {
		if time.Since(approved) > 2*time.Second {
			t.Fatal("the approval given on b is not honoured by a")
		}
		time.Sleep(time.Millisecond)
	}
	t.Logf("honoured by the other replica after %v", time.Since(approved))
	// The message tool may write to eve's chat from either replica.
	if a.Authorize(t.Context(), access.Request{Entry: access.MessageTool, Channel: "telegram", ChatID: "333"}).Verdict != access.Allow {
		t.Fatal("eve's chat is not a destination")
	}
	// A code is approved once, wherever.
	if _, err := a.Approve(t.Context(), d.Code); err == nil {
		t.Fatal("a code approved twice")
	}
}

// Replicas changing the book at once lose none of each other's changes.
func TestPairingConcurrentUpdates(t *testing.T) {
	s := natstest.Start(t)
	_, p1 := replicaChecker(t, s.URL())
	_, p2 := replicaChecker(t, s.URL())
	var wg sync.WaitGroup
	for i := range 20 {
		p := p1
		if i%2 == 1 {
			p = p2
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := p.Update(t.Context(), func(b *access.Book) {
				b.Approved = append(b.Approved, access.Approval{Channel: "slack", SenderID: fmt.Sprint("U", i)})
			}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(2 * time.Second)
	for len(p1.Read().Approved) != 20 || len(p2.Read().Approved) != 20 {
		if time.Now().After(deadline) {
			t.Fatalf("%d and %d approvals of 20", len(p1.Read().Approved), len(p2.Read().Approved))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The approvals of a gateway's file go into the shared store once:
// importing the same file again adds nothing, and another replica's
// file adds what it alone had.
func TestPairingImport(t *testing.T) {
	s := natstest.Start(t)
	a, pa := replicaChecker(t, s.URL())
	file := &access.FilePairings{Path: filepath.Join(t.TempDir(), "pairing.json")}
	if _, err := file.Update(t.Context(), func(b *access.Book) {
		b.Approved = append(b.Approved, access.Approval{Channel: "telegram", SenderID: "222|dan", ChatID: "222"})
	}); err != nil {
		t.Fatal(err)
	}
	imported := func(f *access.FilePairings) int {
		n := 0
		if _, err := pa.Update(t.Context(), func(b *access.Book) { n = b.Merge(f.Read()) }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := imported(file); n != 1 {
		t.Fatalf("imported %d", n)
	}
	if n := imported(file); n != 0 {
		t.Fatalf("imported %d again", n)
	}
	if d := a.Authorize(t.Context(), access.Request{Entry: access.Channel, Channel: "telegram", SenderID: "222|dan"}); d.Verdict != access.Allow {
		t.Fatalf("the imported approval: %+v", d)
	}
	b, _ := replicaChecker(t, s.URL())
	if d := b.Authorize(t.Context(), access.Request{Entry: access.Channel, Channel: "telegram", SenderID: "222|dan"}); d.Verdict != access.Allow {
		t.Fatalf("the imported approval on another replica: %+v", d)
	}
}

// Each replica's copy stays current after the NATS server restarts (its
// watch opened again).
func TestPairingAfterServerRestart(t *testing.T) {
	s := natstest.Start(t)
	_, pa := replicaChecker(t, s.URL())
	b, _ := replicaChecker(t, s.URL())
	s.Restart(t)
	eve := access.Request{Entry: access.Channel, Channel: "telegram", SenderID: "333|eve", ChatID: "333"}
	deadline := time.Now().Add(10 * time.Second)
	var d access.Decision
	for d = b.Authorize(t.Context(), eve); d.Verdict != access.Pair; d = b.Authorize(t.Context(), eve) {
		if time.Now().After(deadline) {
			t.Fatalf("no code after the restart: %+v", d)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := b.Approve(t.Context(), d.Code); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(2 * time.Second)
	for len(pa.Read().Approved) != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the approval given after the restart is not in the other replica's copy")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
