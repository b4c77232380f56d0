package pipelinesrv

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbots/nb/pipeline/handler"
	"github.com/nbots/nb/pipeline/runstore"
	"github.com/nbots/nb/pipeline/runstore/fileruns"
)

// A Stored keeps the runs in a run store: S7 over HTTP, its gate
// answered on the replica that runs it, its events read from the store;
// a cancelled run has ended in the store (no replica takes it over), and
// /resume is refused.
func TestStoredRuns(t *testing.T) {
	st, err := fileruns.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, fixtureOpts{store: st})
	id := f.start(map[string]any{"dot": review, "cartridge": "coder"})
	stream := f.follow(id)
	q := f.question(id)
	if info := f.info(id); info.Status != StatusWaiting || info.Questions != 1 {
		t.Fatalf("while asking: %+v", info)
	}
	f.json("POST", "/pipelines/"+id+"/questions/"+q.ID+"/answer", map[string]any{"value": "A"}, http.StatusOK, nil)
	info := f.wait(id)
	if info.Status != StatusSuccess || strings.Join(info.CompletedNodes, ",") != "start,review_gate,ship_it,exit" {
		t.Fatalf("run %+v", info)
	}
	evs := stream.wait(t)
	if count(evs, "PipelineStarted") != 1 || count(evs, "PipelineCompleted") != 1 || evs[len(evs)-1].Event != "PipelineCompleted" {
		t.Fatalf("events %v", kinds(evs))
	}
	if si, err := st.Get(context.Background(), id); err != nil || !si.Done || si.Events != int64(len(evs)) {
		t.Fatalf("in the store: %+v %v", si, err)
	}
	f.json("POST", "/pipelines/"+id+"/resume", nil, http.StatusConflict, nil)

	// Cancelled while its gate waits: ended for good.
	id = f.start(map[string]any{"dot": review, "cartridge": "coder"})
	f.question(id)
	var cancelled Info
	f.json("POST", "/pipelines/"+id+"/cancel", nil, http.StatusOK, &cancelled)
	if cancelled.Status != StatusCancelled {
		t.Fatalf("cancelled: %+v", cancelled)
	}
	if _, err := st.Take(context.Background(), id); !errors.Is(err, runstore.ErrDone) {
		t.Fatalf("a cancelled run taken over: %v", err)
	}
}

// Handler.Adopt takes over a run that its replica left (released, or
// dead) and finishes it; one whose graph does not load is ended.
func TestStoredAdopt(t *testing.T) {
	root := t.TempDir()
	st, err := fileruns.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, fixtureOpts{store: st})
	other, err := fileruns.Open(root) // another replica
	if err != nil {
		t.Fatal(err)
	}
	extra, _ := json.Marshal(storedMeta{Params: Params{Cartridge: "coder"}})
	ctx := context.Background()
	for id, src := range map[string]string{
		"0123456789abcdef01234567": "digraph W { start [shape=Mdiamond]; exit [shape=Msquare]; work [prompt=\"hi\"]; start -> work -> exit }",
		"0123456789abcdef0123456f": "digraph W { start [shape=Mdiamond] }",
	} {
		r, err := other.Create(ctx, runstore.Info{ID: id, Name: "W", File: "w.dot", Source: []byte(src), Cartridge: "coder", Extra: extra})
		if err != nil {
			t.Fatal(err)
		}
		r.Release() //nolint:errcheck // its replica stopped
	}
	actx, stop := context.WithCancel(ctx)
	defer stop()
	go f.h.Adopt(actx, 50*time.Millisecond)
	info := f.wait("0123456789abcdef01234567")
	if info.Status != StatusSuccess || strings.Join(info.CompletedNodes, ",") != "start,work,exit" {
		t.Fatalf("taken over: %+v", info)
	}
	info = f.wait("0123456789abcdef0123456f")
	if info.Status != StatusFail || !strings.Contains(info.FailureReason, "cannot go on") {
		t.Fatalf("a graph with errors: %+v", info)
	}
	if ids, err := st.Orphans(ctx); err != nil || len(ids) != 0 {
		t.Fatalf("orphans left: %v %v", ids, err)
	}
}

// An answer given to a replica that does not run the run is left in the
// store for the one that does, which takes it: the Review flow started
// on one replica, its gate listed and answered (F, then A) on another.
// A question nobody asks is 404 there too.
func TestStoredAnswerElsewhere(t *testing.T) {
	root := t.TempDir()
	st, err := fileruns.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	other, err := fileruns.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	a := newFixture(t, fixtureOpts{store: st})
	b := newFixture(t, fixtureOpts{store: other})
	id := a.start(map[string]any{"dot": review, "cartridge": "coder"})
	q := b.question(id)
	if info := b.info(id); info.Status != StatusWaiting || info.Questions != 1 {
		t.Fatalf("seen from the other replica while asking: %+v", info)
	}
	b.json("POST", "/pipelines/"+id+"/questions/nope-9/answer", map[string]any{"value": "A"}, http.StatusNotFound, nil)
	b.json("POST", "/pipelines/"+id+"/questions/"+q.ID+"/answer", map[string]any{"value": "F"}, http.StatusOK, nil)
	q2 := b.question(id, q.ID)
	b.json("POST", "/pipelines/"+id+"/questions/"+q2.ID+"/answer", map[string]any{"value": "A"}, http.StatusOK, nil)
	info := a.wait(id)
	if info.Status != StatusSuccess || strings.Join(info.CompletedNodes, ",") != "start,review_gate,fixes,review_gate,ship_it,exit" {
		t.Fatalf("run %+v", info)
	}
	if qs := b.info(id); qs.Questions != 0 {
		t.Fatalf("questions left listed: %+v", qs)
	}
}

// The relay publishes the questions when they change (it has no tick):
// a question asked while the relay idles is listed in the store, and its
// end withdraws it.
func TestRelayPublishesChanges(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := fileruns.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	g, _ := relaying(t, ctx, st, "0123456789abcdef01234567")
	published := func(want string) {
		t.Helper()
		for {
			data, err := st.Questions(ctx, "0123456789abcdef01234567")
			if err != nil {
				t.Fatal(err)
			}
			if string(data) == want || (want != "[]" && strings.Contains(string(data), want)) {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("questions published %s, want %s", data, want)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	published("[]")
	asked := make(chan error, 1)
	go func() {
		_, err := g.Ask(ctx, handler.Question{Stage: "review_gate", Text: "Review Changes"})
		asked <- err
	}()
	published(`"review_gate-1"`)
	if err := g.answer("review_gate-1", handler.Answer{Value: "A"}); err != nil {
		t.Fatal(err)
	}
	if err := <-asked; err != nil {
		t.Fatal(err)
	}
	published("[]")
}

// The relay takes an answer another replica left in the store as soon
// as the store tells it (runstore.Run.Answered), with no time passing
// (it used to look every 200 ms); a gate's timeout still ends its
// question, which is withdrawn from the store; an answer that comes after
// it is dropped, and the run's end (the relay's ctx) withdraws the
// questions still waiting.
func TestRelayWokenByAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		root := t.TempDir()
		st, err := fileruns.Open(root)
		if err != nil {
			t.Fatal(err)
		}
		other, err := fileruns.Open(root) // another replica's handle
		if err != nil {
			t.Fatal(err)
		}
		const id = "0123456789abcdef01234567"
		g, end := relaying(t, ctx, st, id)
		type result struct {
			a   handler.Answer
			err error
		}
		ask := func(q handler.Question) chan result {
			ch := make(chan result, 1)
			go func() {
				a, err := g.Ask(ctx, q)
				ch <- result{a, err}
			}()
			synctest.Wait()
			return ch
		}
		published := func() string {
			t.Helper()
			synctest.Wait()
			data, err := other.Questions(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return string(data)
		}
		answer := func(qid, value string) {
			t.Helper()
			data, _ := json.Marshal(relayAnswer{QID: qid, Answer: handler.Answer{Value: value}})
			if err := other.Answer(ctx, id, data); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}

		asked := ask(handler.Question{Stage: "gate", Text: "Ship it?"})
		if q := published(); !strings.Contains(q, `"gate-1"`) {
			t.Fatalf("questions published %s", q)
		}
		began := time.Now()
		answer("gate-1", "yes")
		select {
		case r := <-asked:
			if r.err != nil || r.a.Value != "yes" || time.Since(began) != 0 {
				t.Fatalf("Ask = %+v after %v; want yes at once", r, time.Since(began))
			}
		default:
			t.Fatal("the answer left in the store did not reach the gate at once")
		}
		if q := published(); q != "[]" {
			t.Fatalf("an answered question still published: %s", q)
		}

		asked = ask(handler.Question{Stage: "gate", Text: "Ship it?", Timeout: time.Hour})
		time.Sleep(time.Hour)
		if r := <-asked; r.err != nil || r.a.Value != handler.TimedOut {
			t.Fatalf("Ask = %+v, want its timeout", r)
		}
		if q := published(); q != "[]" {
			t.Fatalf("a question given up still published: %s", q)
		}
		answer("gate-2", "late") // dropped: nobody asks it

		asked = ask(handler.Question{Stage: "gate", Text: "Ship it?"})
		if q := published(); !strings.Contains(q, `"gate-3"`) || strings.Contains(q, "gate-2") {
			t.Fatalf("questions published %s", q)
		}
		end()
		if q := published(); q != "[]" {
			t.Fatalf("the relay ended with questions published: %s", q)
		}
		cancel()
		if r := <-asked; !errors.Is(r.err, context.Canceled) {
			t.Fatalf("Ask after its run ended = %+v", r)
		}
	})
}

// relaying creates run id in st and relays its questions through a new
// gate (Stored.relay) until end, which may be called more than once; the
// test's cleanup ends it and releases the run.
func relaying(tb testing.TB, ctx context.Context, st runstore.Store, id string) (*gate, func()) {
	tb.Helper()
	sr, err := st.Create(ctx, runstore.Info{ID: id, Name: "Review", Source: []byte(review)})
	if err != nil {
		tb.Fatal(err)
	}
	g := newRelayedGate()
	rctx, stop := context.WithCancel(ctx)
	relayed := make(chan struct{})
	go func() {
		defer close(relayed)
		(&Stored{Store: st}).relay(rctx, sr, g)
	}()
	end := func() { stop(); <-relayed }
	tb.Cleanup(func() { end(); sr.Release() })
	return g, end
}
