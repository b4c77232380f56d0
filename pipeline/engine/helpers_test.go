package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/pipeline"
)

// graphOf builds a graph from compact statements, for the engine's own
// tests (the DOT parser's tests live with it): "graph k=v,k=v",
// "node ID k=v,…" and "edge A->B->C k=v,…" (values may hold spaces but
// not commas). Edges create missing nodes.
func graphOf(t testing.TB, stmts ...string) (*pipeline.Graph, []byte) {
	t.Helper()
	g := &pipeline.Graph{Name: "G", ByID: map[string]*pipeline.Node{}}
	attrs := func(s string) pipeline.Attrs {
		var as pipeline.Attrs
		for _, kv := range strings.Split(s, ",") {
			kv = strings.TrimSpace(kv)
			if kv == "" {
				continue
			}
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				t.Fatalf("attribute %q: want k=v", kv)
			}
			as.Set(pipeline.Attr{Key: k, Value: pipeline.String(v)})
		}
		return as
	}
	node := func(id string) *pipeline.Node {
		if n := g.ByID[id]; n != nil {
			return n
		}
		return g.AddNode(&pipeline.Node{ID: id})
	}
	for _, s := range stmts {
		kind, rest, _ := strings.Cut(s, " ")
		switch kind {
		case "graph":
			g.Attrs = attrs(rest)
		case "node":
			id, a, _ := strings.Cut(rest, " ")
			n := node(id)
			for _, x := range attrs(a) {
				n.Attrs.Set(x)
			}
		case "edge":
			chain, a, _ := strings.Cut(rest, " ")
			ids := strings.Split(chain, "->")
			for i := 0; i+1 < len(ids); i++ {
				node(ids[i])
				node(ids[i+1])
				g.Edges = append(g.Edges, &pipeline.Edge{From: ids[i], To: ids[i+1], Attrs: attrs(a)})
			}
		default:
			t.Fatalf("statement %q", s)
		}
	}
	return g, []byte(strings.Join(stmts, "\n"))
}

// script is a handler that plays scripted outcomes per node (then
// SUCCESS) and records the calls.
type script struct {
	mu    sync.Mutex
	plays map[string][]play
	calls []string
	seen  map[string][]*Stage
}

type play struct {
	out   Outcome
	err   error
	panic bool
	block bool // wait for the context to end
}

func newScript() *script { return &script{plays: map[string][]play{}, seen: map[string][]*Stage{}} }

func (s *script) on(id string, ps ...play) *script {
	s.plays[id] = append(s.plays[id], ps...)
	return s
}

func (s *script) Execute(ctx context.Context, st *Stage) (Outcome, error) {
	s.mu.Lock()
	s.calls = append(s.calls, st.Node.ID)
	s.seen[st.Node.ID] = append(s.seen[st.Node.ID], st)
	var p play
	if q := s.plays[st.Node.ID]; len(q) > 0 {
		p, s.plays[st.Node.ID] = q[0], q[1:]
	} else {
		p.out = Outcome{Status: Success}
	}
	s.mu.Unlock()
	if p.panic {
		panic("scripted panic")
	}
	if p.block {
		<-ctx.Done()
		return Outcome{}, ctx.Err()
	}
	return p.out, p.err
}

func (s *script) callCount(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.calls {
		if c == id {
			n++
		}
	}
	return n
}

func ok() play                { return play{out: Outcome{Status: Success}} }
func st(s Status) play        { return play{out: Outcome{Status: s}} }
func out(o Outcome) play      { return play{out: o} }
func fails(err error) play    { return play{err: err} }
func fail(reason string) play { return play{out: Outcome{Status: Fail, FailureReason: reason}} }
func withTokens(p play, in, o int) play {
	p.out.Tokens = &Tokens{Input: in, Output: o}
	return p
}

// recorder keeps events.
type recorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *recorder) OnEvent(ev Event) {
	r.mu.Lock()
	r.events = append(r.events, ev)
	r.mu.Unlock()
}

func (r *recorder) kinds(k Kind) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Event
	for _, e := range r.events {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

// runWith runs g with h as every node's handler (start, exit and the
// rest), no real sleeps, in a temporary folder.
func runWith(t testing.TB, g *pipeline.Graph, src []byte, h Handler, mod ...func(*Config)) (*Result, *recorder, Config) {
	t.Helper()
	rec := &recorder{}
	reg := NewRegistry()
	reg.Default = h
	cfg := Config{Graph: g, Source: src, File: "test.dot", LogsRoot: t.TempDir(), Handlers: reg, Observer: rec,
		Sleep: func(context.Context, time.Duration) error { return nil }}
	for _, m := range mod {
		m(&cfg)
	}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return res, rec, cfg
}

var errFake = errors.New("fake")

func path(res *Result) string { return strings.Join(res.CompletedNodes, ",") }

func must(t testing.TB, res *Result, status Status, wantPath string) {
	t.Helper()
	if res.Status != status || (wantPath != "" && path(res) != wantPath) {
		t.Fatalf("run ended %s (%s) through %s; want %s through %s", res.Status, res.FailureReason, path(res), status, wantPath)
	}
}
