// Package runstoretest is the conformance suite of runstore.Store
// implementations: creation and description, leases (busy, taken over
// after their holder dies, released, ended), the fencing of a holder that
// lost its lease, the event log followed from another process, and a
// pipeline whose process dies in the middle of a node, resumed by
// another with no finished node run twice and no context update lost;
// the questions a holder publishes and the answers other processes
// leave it, which wake its Run.Answered at once.
package runstoretest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbots/nb/pipeline"
	"github.com/nbots/nb/pipeline/engine"
	"github.com/nbots/nb/pipeline/runstore"
)

// Harness opens an implementation.
type Harness struct {
	// New starts a fresh, empty store and returns a function that opens
	// a view of it as another process (a replica) would: its own
	// connections, its own lease holder name.
	New func(t *testing.T) func() runstore.Store
	// Crash does to a held run what its process dying does: the lease is
	// no longer renewed nor released, and expires now (not after the
	// TTL, to keep the tests short).
	Crash func(t *testing.T, r runstore.Run)
	// Synctest says the store works inside a testing/synctest bubble (it
	// needs no network): the tests of Answered then run in one, where
	// "at once" means with no time passing; otherwise it means within
	// AnsweredWithin.
	Synctest bool
}

// AnsweredWithin is how soon, outside a synctest bubble, an answer must
// wake the holder's Answered. A harness sets its store's fallback poll
// well beyond it (pgruns: an hour), so that only a notification passes.
const AnsweredWithin = 5 * time.Second

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	t.Run("CreateAndGet", func(t *testing.T) { testCreate(t, h) })
	t.Run("Lease", func(t *testing.T) { testLease(t, h) })
	t.Run("ReleaseAndDone", func(t *testing.T) { testRelease(t, h) })
	t.Run("Events", func(t *testing.T) { testEvents(t, h) })
	t.Run("FollowToTheEnd", func(t *testing.T) { testFollowEnd(t, h) })
	t.Run("TakeRace", func(t *testing.T) { testTakeRace(t, h) })
	t.Run("RetakeInSameProcess", func(t *testing.T) { testRetake(t, h) })
	t.Run("PipelineTakeover", func(t *testing.T) { testPipelineTakeover(t, h) })
	t.Run("QuestionsAndAnswers", func(t *testing.T) { testAnswers(t, h) })
	t.Run("AnsweredWakes", func(t *testing.T) { testAnswered(t, h) })
}

// testAnswered: an answer left through another handle of the store (as
// another process, or replica, would) wakes the holder's Answered at
// once, and Answers then has it; so does one left through the holder's
// own handle; a run another handle took over is woken there; a released
// run is no longer woken.
func testAnswered(t *testing.T, h Harness) {
	if h.Synctest {
		synctest.Test(t, func(t *testing.T) { answered(t, h) })
		return
	}
	answered(t, h)
}

func answered(t *testing.T, h Harness) {
	ctx := ctxOf(t)
	open := h.New(t)
	a, b := open(), open()
	ra, err := a.Create(ctx, runstore.Info{ID: "aw", Name: "F", Source: []byte("digraph F {}")})
	if err != nil {
		t.Fatal(err)
	}
	defer ra.Release() //nolint:errcheck // released below, unless the test failed first
	woken := ra.Answered()
	// wake answers through s and checks that w is woken at once and
	// that Answers of r has the answer.
	wake := func(s runstore.Store, r runstore.Run, w <-chan struct{}, answer string) {
		t.Helper()
		began := time.Now()
		if err := s.Answer(ctx, "aw", []byte(answer)); err != nil {
			t.Fatal(err)
		}
		if h.Synctest {
			synctest.Wait()
			select {
			case <-w:
			default:
				t.Fatalf("answer %s: Answered not woken at once", answer)
			}
		} else {
			select {
			case <-w:
				t.Logf("answer %s: Answered woken after %v", answer, time.Since(began))
			case <-time.After(AnsweredWithin):
				t.Fatalf("answer %s: Answered not woken within %v", answer, AnsweredWithin)
			}
		}
		if got, err := r.Answers(ctx); err != nil || len(got) != 1 || string(got[0]) != answer {
			t.Fatalf("answer %s: Answers = %q, %v", answer, got, err)
		}
	}
	wake(b, ra, woken, `{"n":1}`)
	wake(b, ra, woken, `{"n":2}`) // woken again
	wake(a, ra, woken, `{"n":3}`) // through the holder's own handle
	release(t, ra)
	rb, err := b.Take(ctx, "aw")
	if err != nil {
		t.Fatal(err)
	}
	defer release(t, rb)
	wake(a, rb, rb.Answered(), `{"n":4}`) // taken over: woken on the other handle
	select {
	case <-woken:
		t.Error("a released run's Answered was woken")
	default:
	}
}

// testAnswers: the holder's questions are read from another process,
// which leaves answers the holder takes, in order, once each; a run that
// ended or does not exist takes no answer.
func testAnswers(t *testing.T, h Harness) {
	ctx := ctxOf(t)
	open := h.New(t)
	a, b := open(), open()
	ra, err := a.Create(ctx, runstore.Info{ID: "qa", Name: "F", Source: []byte("digraph F {}")})
	if err != nil {
		t.Fatal(err)
	}
	defer release(t, ra)
	if q, err := b.Questions(ctx, "qa"); err != nil || q != nil {
		t.Errorf("Questions before any = %q, %v; want nil", q, err)
	}
	if err := ra.SetQuestions([]byte(`[{"id":"gate-1"}]`)); err != nil {
		t.Fatal(err)
	}
	if q, err := b.Questions(ctx, "qa"); err != nil || string(q) != `[{"id":"gate-1"}]` {
		t.Errorf("Questions = %q, %v; want what the holder set", q, err)
	}
	if _, err := b.Questions(ctx, "nope"); !errors.Is(err, runstore.ErrUnknown) {
		t.Errorf("Questions of an unknown run: %v, want ErrUnknown", err)
	}
	if got, err := ra.Answers(ctx); err != nil || len(got) != 0 {
		t.Errorf("Answers before any = %q, %v", got, err)
	}
	for _, ans := range []string{`{"n":1}`, `{"n":2}`, `{"n":3}`} {
		if err := b.Answer(ctx, "qa", []byte(ans)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ra.Answers(ctx)
	if err != nil || len(got) != 3 || string(got[0]) != `{"n":1}` || string(got[2]) != `{"n":3}` {
		t.Errorf("Answers = %q, %v; want the three, in order", got, err)
	}
	if got, err := ra.Answers(ctx); err != nil || len(got) != 0 {
		t.Errorf("Answers again = %q, %v; want none (taken once)", got, err)
	}
	if err := b.Answer(ctx, "nope", []byte(`{}`)); !errors.Is(err, runstore.ErrUnknown) {
		t.Errorf("Answer to an unknown run: %v, want ErrUnknown", err)
	}
	if err := ra.Save(runstore.Checkpoint{Data: []byte(`{"done":true}`), Done: true, Status: "success"}); err != nil {
		t.Fatal(err)
	}
	if err := b.Answer(ctx, "qa", []byte(`{}`)); !errors.Is(err, runstore.ErrDone) {
		t.Errorf("Answer to an ended run: %v, want ErrDone", err)
	}
}

func ctxOf(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func release(t *testing.T, r runstore.Run) {
	t.Helper()
	if err := r.Release(); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

func testCreate(t *testing.T, h Harness) {
	ctx := ctxOf(t)
	s := h.New(t)()
	info := runstore.Info{ID: "run-1", Name: "Flow", File: "flow.dot", Source: []byte("digraph Flow {\n\t\"x\" }\x00\xff"),
		Vars: map[string]string{"goal": "g"}, Cartridge: "c.yml"}
	r, err := s.Create(ctx, info)
	if err != nil {
		t.Fatal(err)
	}
	defer release(t, r)
	if r.Checkpoint() != nil {
		t.Errorf("a new run's Checkpoint() = %q, want nil", r.Checkpoint())
	}
	if _, err := s.Create(ctx, info); !errors.Is(err, runstore.ErrExists) {
		t.Errorf("Create of an existing id: %v, want ErrExists", err)
	}
	for _, bad := range []string{"", "../x", "a/b", ".hidden", "a b", string(make([]byte, 129))} {
		if _, err := s.Create(ctx, runstore.Info{ID: bad}); err == nil {
			t.Errorf("Create(%q) accepted the id", bad)
		}
	}
	if _, err := s.Get(ctx, "nope"); !errors.Is(err, runstore.ErrUnknown) {
		t.Errorf("Get of an unknown id: %v, want ErrUnknown", err)
	}
	if _, err := s.Take(ctx, "nope"); !errors.Is(err, runstore.ErrUnknown) {
		t.Errorf("Take of an unknown id: %v, want ErrUnknown", err)
	}
	other := h.New(t) // a second store must not see the first one's runs
	if _, err := other().Get(ctx, "run-1"); !errors.Is(err, runstore.ErrUnknown) {
		t.Errorf("another store's Get: %v, want ErrUnknown", err)
	}
	cp := []byte(`{"current_node":"a","done":false}`)
	if err := r.Save(runstore.Checkpoint{Data: cp, Node: "a"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, "run-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "Flow" || got.File != "flow.dot" || string(got.Source) != string(info.Source) || got.Vars["goal"] != "g" || got.Cartridge != "c.yml" {
		t.Errorf("Get = %+v, want what Create was given", got)
	}
	if got.Node != "a" || got.Done || got.Holder == "" || got.Created.IsZero() {
		t.Errorf("Get: node %q done %v holder %q created %v, want a, false, the holder, a time", got.Node, got.Done, got.Holder, got.Created)
	}
	data, err := s.Checkpoint(ctx, "run-1")
	if err != nil || string(data) != string(cp) {
		t.Errorf("Checkpoint = %q, %v; want %q", data, err, cp)
	}
}

func testLease(t *testing.T, h Harness) {
	ctx := ctxOf(t)
	open := h.New(t)
	a, b := open(), open()
	ra, err := a.Create(ctx, runstore.Info{ID: "r", Name: "F", Source: []byte("digraph F {}")})
	if err != nil {
		t.Fatal(err)
	}
	cp1 := []byte(`{"current_node":"one"}`)
	if err := ra.Save(runstore.Checkpoint{Data: cp1, Node: "one"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Take(ctx, "r"); !errors.Is(err, runstore.ErrBusy) {
		t.Fatalf("Take of a held run: %v, want ErrBusy", err)
	}
	if ids, err := b.Orphans(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("Orphans while held = %v, %v; want none", ids, err)
	}
	h.Crash(t, ra)
	ids, err := b.Orphans(ctx)
	if err != nil || !slices.Equal(ids, []string{"r"}) {
		t.Fatalf("Orphans after the holder died = %v, %v; want [r]", ids, err)
	}
	rb, err := b.Take(ctx, "r")
	if err != nil {
		t.Fatalf("Take after the holder died: %v", err)
	}
	defer release(t, rb)
	if string(rb.Checkpoint()) != string(cp1) || rb.Info().Name != "F" || rb.Info().Node != "one" {
		t.Errorf("the taken run: checkpoint %q info %+v, want the last save", rb.Checkpoint(), rb.Info())
	}
	// The old holder, still running somehow, writes nothing more.
	_ = ra.Append([]byte(`{"event":"stale"}`))
	if err := ra.Save(runstore.Checkpoint{Data: []byte(`{"current_node":"stale"}`), Node: "stale"}); !errors.Is(err, runstore.ErrLost) {
		t.Errorf("the old holder's Save: %v, want ErrLost", err)
	}
	select {
	case <-ra.Lost():
	default:
		t.Error("the old holder's Lost() is not closed after a refused Save")
	}
	if !errors.Is(ra.Err(), runstore.ErrLost) {
		t.Errorf("the old holder's Err() = %v, want ErrLost", ra.Err())
	}
	cp2 := []byte(`{"current_node":"two"}`)
	if err := rb.Save(runstore.Checkpoint{Data: cp2, Node: "two"}); err != nil {
		t.Fatal(err)
	}
	if data, _ := a.Checkpoint(ctx, "r"); string(data) != string(cp2) {
		t.Errorf("checkpoint = %q, want the new holder's %q", data, cp2)
	}
	if recs, _ := a.Events(ctx, "r", 0, 0); len(recs) != 0 {
		t.Errorf("events = %v, want none (the stale append must not land)", recs)
	}
	if _, err := a.Take(ctx, "r"); !errors.Is(err, runstore.ErrBusy) {
		t.Errorf("Take while the new holder holds it: %v, want ErrBusy", err)
	}
}

func testRelease(t *testing.T, h Harness) {
	ctx := ctxOf(t)
	open := h.New(t)
	a, b := open(), open()
	ra, err := a.Create(ctx, runstore.Info{ID: "r", Source: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	if err := ra.Append([]byte(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	release(t, ra)
	if err := ra.Save(runstore.Checkpoint{Data: []byte(`{}`)}); !errors.Is(err, runstore.ErrLost) {
		t.Errorf("Save after Release: %v, want ErrLost", err)
	}
	if recs, err := b.Events(ctx, "r", 0, 0); err != nil || len(recs) != 1 {
		t.Errorf("events after Release = %v, %v; want the one appended before", recs, err)
	}
	// A run released before it ended is an orphan at once.
	if ids, _ := b.Orphans(ctx); !slices.Equal(ids, []string{"r"}) {
		t.Errorf("Orphans after Release = %v, want [r]", ids)
	}
	rb, err := b.Take(ctx, "r")
	if err != nil {
		t.Fatalf("Take after Release: %v", err)
	}
	if err := rb.Save(runstore.Checkpoint{Data: []byte(`{"current_node":"exit","done":true,"status":"success"}`), Node: "exit", Done: true, Status: "success"}); err != nil {
		t.Fatal(err)
	}
	release(t, rb)
	info, err := a.Get(ctx, "r")
	if err != nil || !info.Done || info.Status != "success" || info.Holder != "" {
		t.Errorf("Get of an ended run = %+v, %v; want done, success, no holder", info, err)
	}
	if _, err := a.Take(ctx, "r"); !errors.Is(err, runstore.ErrDone) {
		t.Errorf("Take of an ended run: %v, want ErrDone", err)
	}
	if ids, _ := a.Orphans(ctx); len(ids) != 0 {
		t.Errorf("Orphans = %v, want none: the run ended", ids)
	}
}

func testEvents(t *testing.T, h Harness) {
	ctx := ctxOf(t)
	open := h.New(t)
	a, b := open(), open()
	ra, err := a.Create(ctx, runstore.Info{ID: "r", Source: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	defer release(t, ra)
	const n = 300
	got := make(chan []int, 1)
	go func() {
		var seen []int
		err := runstore.Follow(ctx, b, "r", 0, func(r runstore.Record) bool {
			var ev struct{ N int }
			if err := json.Unmarshal(r.Data, &ev); err != nil || int64(ev.N) != r.Seq {
				t.Errorf("record %d = %q (%v): want its n to be its seq", r.Seq, r.Data, err)
			}
			seen = append(seen, ev.N)
			return len(seen) < n
		})
		if err != nil {
			t.Errorf("Follow: %v", err)
		}
		got <- seen
	}()
	for i := 1; i <= n; i++ {
		if err := ra.Append([]byte(fmt.Sprintf(`{"n":%d}`, i))); err != nil {
			t.Fatal(err)
		}
		if i%50 == 0 {
			if err := ra.Save(runstore.Checkpoint{Data: []byte(fmt.Sprintf(`{"current_node":"n%d"}`, i))}); err != nil {
				t.Fatal(err)
			}
		}
		if i%97 == 0 {
			time.Sleep(20 * time.Millisecond) // let the follower catch up and wait
		}
	}
	var seen []int
	select {
	case seen = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("the follower did not see every event in 30 s")
	}
	for i, v := range seen {
		if v != i+1 {
			t.Fatalf("followed events %v…: want 1, 2, 3… with no gap or repeat", seen[:i+1])
		}
	}
	recs, err := a.Events(ctx, "r", 10, 5)
	if err != nil || len(recs) != 5 || recs[0].Seq != 11 || recs[4].Seq != 15 {
		t.Errorf("Events(after 10, limit 5) = %v, %v; want 11…15", recs, err)
	}
	if _, err := b.Events(ctx, "nope", 0, 0); !errors.Is(err, runstore.ErrUnknown) {
		t.Errorf("Events of an unknown run: %v, want ErrUnknown", err)
	}
}

// testFollowEnd: Follow returns when the run has ended and every event
// was given, whether or not its last event says it ended.
func testFollowEnd(t *testing.T, h Harness) {
	ctx, cancel := context.WithTimeout(ctxOf(t), 15*time.Second)
	defer cancel()
	open := h.New(t)
	a, b := open(), open()
	ra, err := a.Create(ctx, runstore.Info{ID: "ends", Source: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	if err := ra.Append([]byte(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	type result struct {
		seqs []int64
		err  error
	}
	got := make(chan result, 1)
	go func() {
		var seqs []int64
		err := runstore.Follow(ctx, b, "ends", 0, func(r runstore.Record) bool {
			seqs = append(seqs, r.Seq)
			return true
		})
		got <- result{seqs, err}
	}()
	if err := ra.Append([]byte(`{"n":2}`)); err != nil {
		t.Fatal(err)
	}
	if err := ra.Save(runstore.Checkpoint{Data: []byte(`{"done":true,"status":"fail"}`), Done: true, Status: "fail"}); err != nil {
		t.Fatal(err)
	}
	if err := ra.Append([]byte(`{"n":3}`)); err != nil {
		t.Fatal(err)
	}
	release(t, ra)
	r := <-got
	if r.err != nil || !slices.Equal(r.seqs, []int64{1, 2, 3}) {
		t.Errorf("Follow of a run that ended = events %v, %v; want 1, 2, 3 and nil", r.seqs, r.err)
	}
}

func testTakeRace(t *testing.T, h Harness) {
	ctx := ctxOf(t)
	open := h.New(t)
	a := open()
	ra, err := a.Create(ctx, runstore.Info{ID: "r", Source: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	h.Crash(t, ra)
	var (
		mu   sync.Mutex
		won  []runstore.Run
		wg   sync.WaitGroup
		errs []error
	)
	for range 4 {
		s := open()
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.Take(ctx, "r")
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				won = append(won, r)
			} else if !errors.Is(err, runstore.ErrBusy) {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	if len(won) != 1 || len(errs) != 0 {
		t.Errorf("4 replicas took an orphan at once: %d won, errors %v; want exactly 1 winner, the others ErrBusy", len(won), errs)
	}
	for _, r := range won {
		release(t, r)
	}
}

// testRetake: a process that lost a run and took it over again (its
// own orphan) writes through the new taking only, never the old.
func testRetake(t *testing.T, h Harness) {
	ctx := ctxOf(t)
	s := h.New(t)()
	old, err := s.Create(ctx, runstore.Info{ID: "r", Source: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	h.Crash(t, old)
	again, err := s.Take(ctx, "r")
	if err != nil {
		t.Fatalf("Take of its own orphan: %v", err)
	}
	defer release(t, again)
	if err := old.Save(runstore.Checkpoint{Data: []byte(`{"current_node":"stale"}`), Node: "stale"}); !errors.Is(err, runstore.ErrLost) {
		t.Errorf("the lost taking's Save: %v, want ErrLost", err)
	}
	if err := again.Save(runstore.Checkpoint{Data: []byte(`{"current_node":"new"}`), Node: "new"}); err != nil {
		t.Fatal(err)
	}
	if data, _ := s.Checkpoint(ctx, "r"); string(data) != `{"current_node":"new"}` {
		t.Errorf("checkpoint = %s", data)
	}
}

// flow is the pipeline of the takeover test: each node sets a context
// key of its own.
const flow = `digraph Takeover {
	graph [goal="survive a replica's death"]
	start [shape=Mdiamond]
	exit  [shape=Msquare]
	a [prompt="a"]
	b [prompt="b"]
	c [prompt="c"]
	d [prompt="d"]
	start -> a -> b -> c -> d -> exit
}`

// replica runs pipelines as one process of the test: it records the
// nodes it finished, and blocks in node block until unblock is closed.
type replica struct {
	name    string
	block   string
	blocked chan struct{}
	unblock chan struct{}

	mu       sync.Mutex
	finished []string
}

func (p *replica) handlers() *engine.Registry {
	reg := engine.NewRegistry()
	ok := engine.HandlerFunc(func(ctx context.Context, s *engine.Stage) (engine.Outcome, error) {
		return engine.Outcome{Status: engine.Success}, nil
	})
	reg.Register("start", ok)
	reg.Register("exit", ok)
	reg.Default = engine.HandlerFunc(func(ctx context.Context, s *engine.Stage) (engine.Outcome, error) {
		if s.Node.ID == p.block {
			close(p.blocked)
			<-p.unblock // the process is frozen: the other replica takes over meanwhile
		}
		p.mu.Lock()
		p.finished = append(p.finished, s.Node.ID)
		p.mu.Unlock()
		return engine.Outcome{Status: engine.Success, ContextUpdates: map[string]any{"by." + s.Node.ID: p.name}}, nil
	})
	return reg
}

func (p *replica) done() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.finished)
}

func testPipelineTakeover(t *testing.T, h Harness) {
	ctx := ctxOf(t)
	open := h.New(t)
	sa, sb, sc := open(), open(), open()
	g, diags, err := pipeline.Load("takeover.dot", []byte(flow))
	if err != nil || pipeline.HasErrors(diags) {
		t.Fatalf("load: %v %v", err, diags)
	}
	ra, err := sa.Create(ctx, runstore.Info{ID: "takeover", Name: g.Name, File: "takeover.dot", Source: []byte(flow)})
	if err != nil {
		t.Fatal(err)
	}
	A := &replica{name: "A", block: "c", blocked: make(chan struct{}), unblock: make(chan struct{})}
	resA := make(chan *engine.Result, 1)
	go func() {
		res, err := engine.Run(context.Background(), engine.Config{Graph: g, Source: []byte(flow), File: "takeover.dot",
			LogsRoot: t.TempDir(), Handlers: A.handlers(), Stored: ra})
		if err != nil {
			t.Errorf("replica A: %v", err)
		}
		resA <- res
	}()
	select {
	case <-A.blocked:
	case <-ctx.Done():
		t.Fatal("replica A never reached node c")
	}
	h.Crash(t, ra) // A dies (or freezes) in the middle of c

	// B adopts the orphan, from the store alone.
	B := &replica{name: "B"}
	resB := make(chan *engine.Result, 1)
	adopt, stopAdopt := context.WithCancel(ctx)
	defer stopAdopt()
	go runstore.Adopt(adopt, sb, 50*time.Millisecond, func(rb runstore.Run) {
		// The result is given once the run is released: the release
		// writes the events still pending, which are B's, not A's.
		var res *engine.Result
		defer func() {
			rb.Release() //nolint:errcheck // checked through the store below
			resB <- res
		}()
		info := rb.Info()
		g, _, err := pipeline.Load(info.File, info.Source)
		if err != nil {
			t.Errorf("replica B: load the stored graph: %v", err)
			return
		}
		res, err = engine.Resume(ctx, engine.Config{Graph: g, Source: info.Source, File: info.File, LogsRoot: t.TempDir(),
			Handlers: B.handlers(), Stored: rb})
		if err != nil {
			t.Errorf("replica B: resume: %v", err)
		}
	}, func(err error) { t.Errorf("adopt: %v", err) })
	var res *engine.Result
	select {
	case res = <-resB:
	case <-ctx.Done():
		t.Fatal("replica B did not take the run over")
	}
	stopAdopt()
	if res == nil || res.Status != engine.Success || !res.ReachedExit {
		t.Fatalf("replica B's result: %+v, want success at the exit", res)
	}
	if got := A.done(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("A finished %v, want [a b]", got)
	}
	if got := B.done(); !slices.Equal(got, []string{"c", "d"}) {
		t.Errorf("B finished %v, want [c d]: a node A finished ran again, or one was skipped", got)
	}
	// A wakes up and finishes c: its lease is gone, it writes nothing.
	evBefore, _ := sc.Events(ctx, "takeover", 0, 0)
	cpBefore, _ := sc.Checkpoint(ctx, "takeover")
	close(A.unblock)
	select {
	case r := <-resA:
		if r == nil || !r.Lost {
			t.Errorf("replica A's result: %+v, want Lost", r)
		}
	case <-ctx.Done():
		t.Fatal("replica A did not stop after losing its lease")
	}
	evAfter, _ := sc.Events(ctx, "takeover", 0, 0)
	cpAfter, _ := sc.Checkpoint(ctx, "takeover")
	if len(evAfter) != len(evBefore) || string(cpAfter) != string(cpBefore) {
		t.Errorf("the replica that lost its lease wrote: %d → %d events, checkpoint changed %v", len(evBefore), len(evAfter), string(cpAfter) != string(cpBefore))
	}

	cp, err := engine.ParseCheckpoint("stored", cpAfter)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"start", "a", "b", "c", "d", "exit"}; !slices.Equal(cp.CompletedNodes, want) || !cp.Done || cp.Status != engine.Success {
		t.Errorf("checkpoint: completed %v done %v status %v; want %v, done, success", cp.CompletedNodes, cp.Done, cp.Status, want)
	}
	for node, by := range map[string]string{"a": "A", "b": "A", "c": "B", "d": "B"} {
		if got := cp.Context["by."+node]; got != by {
			t.Errorf("context by.%s = %v, want %s: a context update was lost", node, got, by)
		}
	}
	// The events, followed from a third replica: one StageCompleted per
	// node, a second PipelineStarted (the resume), PipelineCompleted last.
	completed := map[string]int{}
	var kinds []engine.Kind
	err = runstore.Follow(ctx, sc, "takeover", 0, func(r runstore.Record) bool {
		var ev engine.Event
		if err := json.Unmarshal(r.Data, &ev); err != nil {
			t.Errorf("event %d: %v", r.Seq, err)
		}
		kinds = append(kinds, ev.Kind)
		if ev.Kind == engine.StageCompleted {
			completed[ev.Name]++
		}
		return ev.Kind != engine.PipelineCompleted
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"start", "a", "b", "c", "d", "exit"} {
		if completed[n] != 1 {
			t.Errorf("StageCompleted %s × %d in the log, want 1 (%v)", n, completed[n], kinds)
		}
	}
	if starts := countKind(kinds, engine.PipelineStarted); starts != 2 {
		t.Errorf("PipelineStarted × %d, want 2 (the start and the takeover)", starts)
	}
	info, err := sc.Get(ctx, "takeover")
	if err != nil || !info.Done || info.Status != "success" || info.Node != "exit" {
		t.Errorf("Get = %+v, %v; want done, success, at exit", info, err)
	}
}

func countKind(ks []engine.Kind, k engine.Kind) int {
	n := 0
	for _, x := range ks {
		if x == k {
			n++
		}
	}
	return n
}
