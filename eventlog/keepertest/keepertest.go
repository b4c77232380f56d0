// Package keepertest is the conformance suite of eventlog.Keeper's
// backends: the same tests run on a keeper in memory and on one in each
// eventlog.Shared store (package eventlog/pglog's PostgreSQL), so that
// what nb serve's operator sees of its stored responses and agent runs
// does not depend on where they are kept.
package keepertest

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/eventlog"
)

// value is what the suite keeps: a text and what its listing shows.
type value struct {
	Text  string `json:"text"`
	Model string `json:"model"`
	State string `json:"state"`
}

func keeper(kind string, lim eventlog.Limits, shared eventlog.Shared) *eventlog.Keeper[*value] {
	return eventlog.NewKeeper(kind, lim, nil, shared,
		func(v *value) ([]byte, error) { return json.Marshal(v) },
		func(b []byte) (*value, error) {
			var v value
			err := json.Unmarshal(b, &v)
			return &v, err
		}).Summarized(func(v *value) eventlog.Summary {
		return eventlog.Summary{Label: v.Model, Status: v.State, Created: created, Tokens: len(v.Text)}
	})
}

var created = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// Run runs the suite. shared returns a fresh shared store for the test,
// or nil to test the keeper in memory.
func Run(t *testing.T, shared func(t *testing.T) eventlog.Shared) {
	t.Run("List", func(t *testing.T) { testList(t, shared(t)) })
	t.Run("ListExpired", func(t *testing.T) { testListExpired(t, shared(t)) })
}

// pause lets the store's clock move between puts (PostgreSQL's now() is
// in microseconds).
func pause() { time.Sleep(2 * time.Millisecond) }

// The listing is every owner's values of the keeper's kind only, the
// most recently put first, bounded, with their summaries and sizes and
// without their contents; a value put again comes first, a deleted one
// is gone.
func testList(t *testing.T, shared eventlog.Shared) {
	ctx := context.Background()
	lim := eventlog.Limits{Count: 100, Bytes: 1 << 20, TTL: time.Minute}
	k := keeper("response", lim, shared)
	other := keeper("agent_run", lim, shared)
	if l, err := k.List(ctx, 10); err != nil || len(l) != 0 {
		t.Fatalf("empty listing: %v %v", l, err)
	}
	put := func(k *eventlog.Keeper[*value], id, owner string, v *value) {
		t.Helper()
		if ok, err := k.Put(ctx, id, owner, v, int64(len(v.Text))); !ok || err != nil {
			t.Fatalf("put %s: %v %v", id, ok, err)
		}
		pause()
	}
	put(k, "r1", "alice", &value{Text: "secret text one", Model: "writer", State: "completed"})
	put(k, "r2", "bob", &value{Text: "two", Model: "coder", State: "failed"})
	put(other, "run1", "alice", &value{Text: "a run", Model: "agent", State: "running"})
	put(k, "r3", "alice", &value{Text: "three!", Model: "writer", State: "incomplete"})

	l, err := k.List(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(l []eventlog.Entry) string {
		var s []string
		for _, e := range l {
			s = append(s, e.ID)
		}
		return strings.Join(s, " ")
	}
	if got := ids(l); got != "r3 r2 r1" {
		t.Fatalf("listing %q, want r3 r2 r1", got)
	}
	for _, e := range l {
		if e.Size <= 0 || e.Put.IsZero() || time.Since(e.Put) > time.Minute || time.Until(e.Put) > time.Minute {
			t.Errorf("%s: size %d, put %v", e.ID, e.Size, e.Put)
		}
		if !e.Created.Equal(created) {
			t.Errorf("%s: created %v", e.ID, e.Created)
		}
		b, _ := json.Marshal(e)
		if strings.Contains(string(b), "secret text") {
			t.Errorf("the listing shows a value's contents: %s", b)
		}
	}
	if e := l[1]; e.Owner != "bob" || e.Label != "coder" || e.Status != "failed" || e.Tokens != 3 {
		t.Errorf("r2 listed as %+v", e)
	}
	if l[0].Put.Before(l[1].Put) || l[1].Put.Before(l[2].Put) {
		t.Errorf("put times out of order: %v %v %v", l[0].Put, l[1].Put, l[2].Put)
	}
	if l, err := other.List(ctx, 10); err != nil || ids(l) != "run1" || l[0].Status != "running" {
		t.Fatalf("the other kind's listing: %+v %v", l, err)
	}
	if l, err := k.List(ctx, 2); err != nil || ids(l) != "r3 r2" {
		t.Fatalf("listing 2: %q %v", ids(l), err)
	}
	if l, err := k.List(ctx, 0); err != nil || ids(l) != "r3" {
		t.Fatalf("listing 0 (at least one): %q %v", ids(l), err)
	}

	// Put again: first, with its new summary.
	put(other, "run1", "alice", &value{Text: "a run", Model: "agent", State: "final_result"})
	put(k, "r1", "alice", &value{Text: "secret text one", Model: "writer", State: "completed again"})
	if l, err := k.List(ctx, 10); err != nil || ids(l) != "r1 r3 r2" || l[0].Status != "completed again" {
		t.Fatalf("after r1 was put again: %q %v", ids(l), err)
	}
	if l, err := other.List(ctx, 10); err != nil || ids(l) != "run1" || l[0].Status != "final_result" {
		t.Fatalf("the run after it ended: %+v %v", l, err)
	}
	if ok, err := k.Delete(ctx, "r3", "alice"); !ok || err != nil {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if l, err := k.List(ctx, 10); err != nil || ids(l) != "r1 r2" {
		t.Fatalf("after r3 was deleted: %q %v", ids(l), err)
	}
}

// An expired value is not listed.
func testListExpired(t *testing.T, shared eventlog.Shared) {
	ctx := context.Background()
	k := keeper("response", eventlog.Limits{Count: 100, Bytes: 1 << 20, TTL: 300 * time.Millisecond}, shared)
	if _, err := k.Put(ctx, "old", "", &value{Text: "x"}, 1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if _, err := k.Put(ctx, "new", "", &value{Text: "y"}, 1); err != nil {
		t.Fatal(err)
	}
	if l, err := k.List(ctx, 10); err != nil || len(l) != 2 {
		t.Fatalf("before the expiry: %+v %v", l, err)
	}
	time.Sleep(150 * time.Millisecond)
	if l, err := k.List(ctx, 10); err != nil || len(l) != 1 || l[0].ID != "new" {
		t.Fatalf("after the first expired: %+v %v", l, err)
	}
}
