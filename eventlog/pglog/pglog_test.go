package pglog_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/nbots/nb/eventlog"
	"github.com/nbots/nb/eventlog/keepertest"
	"github.com/nbots/nb/eventlog/pglog"
	"github.com/nbots/nb/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var limits = eventlog.Limits{Count: 100, Bytes: 1 << 20, TTL: time.Minute}

// replica opens a store named name on url, closed when the test ends.
func replica(t testing.TB, url, name string, o pglog.Options) *pglog.Store {
	t.Helper()
	o.Replica = name
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(tlog{t}, nil))
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = 100 * time.Millisecond
	}
	if o.Poll == 0 {
		o.Poll = 100 * time.Millisecond
	}
	s, err := pglog.Open(context.Background(), url, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	go s.Run(context.Background()) //nolint:errcheck // ends with Close
	return s
}

// readAll follows l until it ends and returns its output and state.
func readAll(t *testing.T, l *eventlog.Log) (string, eventlog.State) {
	t.Helper()
	var out strings.Builder
	from := 0
	deadline := time.After(10 * time.Second)
	for {
		text, st := l.Output(from)
		out.WriteString(text)
		from += len(text)
		if st.Status != eventlog.Open {
			return out.String(), st
		}
		select {
		case <-st.Changed:
		case <-deadline:
			t.Fatalf("the copy did not end; so far %q", out.String())
		}
	}
}

// A log written on one replica is read to the end from another, from
// its start and from a reader that came midway; another owner does not
// see it.
func TestPublishFollow(t *testing.T) {
	url := pgtest.New(t)
	a := replica(t, url, "a", pglog.Options{})
	b := replica(t, url, "b", pglog.Options{})
	ctx := context.Background()

	l := eventlog.New(0)
	if err := a.Publish(ctx, "s1", "tok", l, limits, nil); err != nil {
		t.Fatal(err)
	}
	l.WriteString("Hello")
	time.Sleep(50 * time.Millisecond)
	c, stop, err := b.Follow(ctx, "s1", "tok", 0)
	if err != nil || c == nil {
		t.Fatalf("follow: %v %v", c, err)
	}
	defer stop()
	if other, _, err := b.Follow(ctx, "s1", "another", 0); other != nil || err != nil {
		t.Fatalf("another owner follows the log: %v %v", other, err)
	}
	want := "Hello"
	for i := range 50 {
		w := strings.Repeat(string(rune('a'+i%26)), i+1)
		l.WriteString(w)
		want += w
	}
	l.Finish(errors.New("boom"), "the model failed")
	got, st := readAll(t, c)
	if got != want || st.Status != eventlog.Failed || st.Err != "the model failed" {
		t.Fatalf("copy: %q %v %q; want %q", got, st.Status, st.Err, want)
	}
	// A late reader gets it whole at once.
	c2, _, err := b.Follow(ctx, "s1", "tok", 0)
	if err != nil || c2 == nil {
		t.Fatal(err)
	}
	if got, st := readAll(t, c2); got != want || st.Status != eventlog.Failed {
		t.Fatalf("late copy: %q %v", got, st.Status)
	}
	if c, _, _ := b.Follow(ctx, "nope", "tok", 0); c != nil {
		t.Fatal("an unknown id is followed")
	}
}

// A log whose replica stops reaching the store before the log ends is
// failed by the others, saying so; when the replica comes back, it is
// told its log was lost.
func TestLostReplica(t *testing.T) {
	url := pgtest.New(t)
	a := replica(t, url, "a", pglog.Options{DeadAfter: 500 * time.Millisecond})
	b := replica(t, url, "b", pglog.Options{DeadAfter: 500 * time.Millisecond})
	ctx := context.Background()
	l := eventlog.New(0)
	lost := make(chan error, 1)
	if err := a.Publish(ctx, "s1", "", l, limits, func(err error) { lost <- err }); err != nil {
		t.Fatal(err)
	}
	l.WriteString("partial")
	time.Sleep(100 * time.Millisecond)
	a.Close() // the replica dies: no more heartbeats
	c, stop, err := b.Follow(ctx, "s1", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	got, st := readAll(t, c)
	if got != "partial" || st.Status != eventlog.Failed || !strings.Contains(st.Err, "replica that ran this stream (a) stopped") || !strings.Contains(st.Err, "after byte 7") {
		t.Fatalf("copy of a lost log: %q %v %q", got, st.Status, st.Err)
	}
}

// Values are given back to their owner only, until they expire or are
// deleted.
func TestValues(t *testing.T) {
	url := pgtest.New(t)
	a := replica(t, url, "a", pglog.Options{})
	b := replica(t, url, "b", pglog.Options{})
	ctx := context.Background()
	if err := a.Put(ctx, "response", "r1", "tok", []byte(`{"x":1}`), eventlog.Summary{}, limits); err != nil {
		t.Fatal(err)
	}
	if v, err := b.Get(ctx, "response", "r1", "tok"); err != nil || string(v) != `{"x":1}` {
		t.Fatalf("get: %q %v", v, err)
	}
	for _, k := range [][2]string{{"response", "r1"}, {"round", "r1"}} {
		owner := "other"
		if k[0] == "round" {
			owner = "tok"
		}
		if _, err := b.Get(ctx, k[0], k[1], owner); !errors.Is(err, eventlog.ErrUnknown) {
			t.Fatalf("get %v for %s: %v", k, owner, err)
		}
	}
	if ok, err := b.Delete(ctx, "response", "r1", "other"); ok || err != nil {
		t.Fatalf("another owner deletes: %v %v", ok, err)
	}
	if ok, err := b.Delete(ctx, "response", "r1", "tok"); !ok || err != nil {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if _, err := a.Get(ctx, "response", "r1", "tok"); !errors.Is(err, eventlog.ErrUnknown) {
		t.Fatalf("deleted value: %v", err)
	}
	short := eventlog.Limits{Count: 10, Bytes: 1 << 20, TTL: 200 * time.Millisecond}
	if err := a.Put(ctx, "response", "r2", "tok", []byte(`2`), eventlog.Summary{}, short); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if _, err := b.Get(ctx, "response", "r2", "tok"); !errors.Is(err, eventlog.ErrUnknown) {
		t.Fatalf("expired value: %v", err)
	}
}

// The password of the URL never shows in an error.
func TestOpenErrorRedacted(t *testing.T) {
	_, err := pglog.Open(context.Background(), "postgres://nb:s3cret-pass@127.0.0.1:1/db?connect_timeout=1", pglog.Options{})
	if err == nil || strings.Contains(err.Error(), "s3cret-pass") || !strings.Contains(err.Error(), "postgres://127.0.0.1:1/db") {
		t.Fatalf("error: %v", err)
	}
	t.Log(err)
}

type tlog struct{ t testing.TB }

func (w tlog) Write(p []byte) (int, error) { w.t.Log(strings.TrimSpace(string(p))); return len(p), nil }

// A replica whose log the others failed (they took it for gone while it
// could not reach the store) is told so at its next write, and stops the
// exchange.
func TestPublishTaken(t *testing.T) {
	url := pgtest.New(t)
	a := replica(t, url, "a", pglog.Options{})
	ctx := context.Background()
	l := eventlog.New(0)
	lost := make(chan error, 1)
	if err := a.Publish(ctx, "s1", "", l, limits, func(err error) { lost <- err }); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `UPDATE nb_serve_logs SET status = 2, err = 'lost' WHERE id = 's1'`); err != nil {
		t.Fatal(err)
	}
	l.WriteString("more")
	select {
	case err := <-lost:
		if !strings.Contains(err.Error(), "took stream s1 for lost") {
			t.Errorf("lost: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the writer was not told")
	}
}

// A copy that is read says so: the writer's replica learns its log was
// read elsewhere.
func TestLastRead(t *testing.T) {
	url := pgtest.New(t)
	a := replica(t, url, "a", pglog.Options{})
	b := replica(t, url, "b", pglog.Options{})
	ctx := context.Background()
	l := eventlog.New(0)
	if err := a.Publish(ctx, "s1", "", l, limits, nil); err != nil {
		t.Fatal(err)
	}
	if at, err := a.LastRead(ctx, "s1"); err != nil || !at.IsZero() {
		t.Fatalf("before any read: %v %v", at, err)
	}
	c, stop, err := b.Follow(ctx, "s1", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.Output(0) // a reader of the copy
		at, err := a.LastRead(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		if !at.IsZero() && time.Since(at) < 5*time.Second {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never read: %v", at)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Beyond the count or the bytes their writers gave, the oldest values of
// a kind and the oldest ended logs are forgotten; open logs are not.
func TestLimits(t *testing.T) {
	url := pgtest.New(t)
	a := replica(t, url, "a", pglog.Options{Janitor: 100 * time.Millisecond})
	ctx := context.Background()
	two := eventlog.Limits{Count: 2, Bytes: 1 << 20, TTL: time.Minute}
	for _, id := range []string{"v1", "v2", "v3"} {
		if err := a.Put(ctx, "response", id, "", []byte(id), eventlog.Summary{}, two); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	one := eventlog.Limits{Count: 1, Bytes: 1 << 20, TTL: time.Minute}
	var open *eventlog.Log
	for i, id := range []string{"l1", "l2", "l3"} {
		l := eventlog.New(0)
		if err := a.Publish(ctx, id, "", l, one, nil); err != nil {
			t.Fatal(err)
		}
		l.WriteString(id)
		if i < 2 {
			l.Finish(nil, "")
		} else {
			open = l
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer open.Finish(nil, "")
	until := time.Now().Add(10 * time.Second)
	for {
		_, err1 := a.Get(ctx, "response", "v1", "")
		c, _, _ := a.Follow(ctx, "l1", "", 0)
		if errors.Is(err1, eventlog.ErrUnknown) && c == nil {
			break
		}
		if time.Now().After(until) {
			t.Fatalf("not trimmed: v1 %v, l1 %v", err1, c != nil)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, id := range []string{"v2", "v3"} {
		if _, err := a.Get(ctx, "response", id, ""); err != nil {
			t.Errorf("%s: %v", id, err)
		}
	}
	for _, id := range []string{"l2", "l3"} {
		if c, stop, err := a.Follow(ctx, id, "", 0); c == nil || err != nil {
			t.Errorf("%s: %v", id, err)
		} else {
			stop()
		}
	}
}

// Run is the replica's heartbeat: while it runs the others find the
// replica alive; once its context ended it returns nil at once, and the
// others take the replica for gone after DeadAfter.
func TestRunHeartbeat(t *testing.T) {
	url := pgtest.New(t)
	a, err := pglog.Open(context.Background(), url, pglog.Options{Replica: "a", Heartbeat: 50 * time.Millisecond, DeadAfter: 400 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := replica(t, url, "b", pglog.Options{DeadAfter: 400 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	time.Sleep(800 * time.Millisecond) // twice DeadAfter: alive only if Run beats
	if alive, err := b.Alive(context.Background(), "a"); err != nil || !alive {
		t.Fatalf("while Run beats: alive %v, %v", alive, err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run = %v, want nil once its context ended", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return when its context ended")
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		alive, err := b.Alive(context.Background(), "a")
		if err != nil {
			t.Fatal(err)
		}
		if !alive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica still seen alive after Run returned")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The keeper on PostgreSQL passes the backends' conformance suite (as
// the keeper in memory does).
func TestKeeperConformance(t *testing.T) {
	keepertest.Run(t, func(t *testing.T) eventlog.Shared { return replica(t, pgtest.New(t), "a", pglog.Options{}) })
}
