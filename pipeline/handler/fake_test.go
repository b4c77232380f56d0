package handler

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/pipeline"
	"github.com/nbots/nb/pipeline/engine"
	"github.com/nbots/nb/provider"
	_ "github.com/nbots/nb/provider/openai" // the fake speaks OpenAI's API
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

// fakeLLM is the scripted fake provider of the scenarios: each LLM
// stage is recognised by a word of its prompt, and answers with the next
// of its scripted steps: a status (the model calls the outcome tool
// with it, then answers "done"), "text:…" (a plain answer), "http:N"
// (the API answers with status N), or a JSON object (the outcome tool's
// arguments). Unscripted stages answer "ok".
type fakeLLM struct {
	mu     sync.Mutex
	script map[string][]string
	calls  map[string]int
	order  []string
}

func newFake(script map[string][]string) *fakeLLM {
	return &fakeLLM{script: script, calls: map[string]int{}}
}

func (f *fakeLLM) brain(t providertest.Turn) providertest.Reply {
	if t.Last().Role == "tool" {
		return providertest.Reply{Chunks: []string{"done"}}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	u := t.LastUser()
	key := ""
	for k := range f.script {
		if strings.Contains(u, k) && len(k) > len(key) {
			key = k
		}
	}
	f.calls[key]++
	f.order = append(f.order, key)
	steps := f.script[key]
	if len(steps) == 0 {
		return providertest.Reply{Chunks: []string{"ok"}}
	}
	step := steps[0]
	f.script[key] = steps[1:]
	switch {
	case strings.HasPrefix(step, "text:"):
		return providertest.Reply{Chunks: []string{strings.TrimPrefix(step, "text:")}}
	case strings.HasPrefix(step, "http:"):
		var code int
		fmt.Sscan(strings.TrimPrefix(step, "http:"), &code)
		return providertest.Reply{Status: code, ErrorBody: `{"error":{"message":"scripted"}}`}
	case strings.HasPrefix(step, "{"):
		return providertest.Reply{Calls: []providertest.Call{{ID: "c1", Name: "outcome", Arguments: step}}}
	}
	args, _ := json.Marshal(map[string]string{"status": strings.ToLower(step)})
	return providertest.Reply{Calls: []providertest.Call{{ID: "c1", Name: "outcome", Arguments: string(args)}}}
}

func (f *fakeLLM) count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[key]
}

// backendFor serves f as an OpenAI-compatible API and returns the bot
// backend of a cartridge that talks to it (provider retries off: the
// engine's retries are under test).
func backendFor(t testing.TB, f *fakeLLM) *BotBackend {
	t.Helper()
	return backendWithBrain(t, f.brain)
}

// backendWithBrain is backendFor with any brain; extra is added to the
// cartridge (its tools).
func backendWithBrain(t testing.TB, brain providertest.Brain, extra ...string) *BotBackend {
	t.Helper()
	srv := httptest.NewServer(openaitest.New(brain))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	cart := filepath.Join(dir, "coder.yml")
	src := fmt.Sprintf(`meta: {author: test, name: coder, version: 1.0.0}
provider:
  id: openai
  credentials: {address: %s, access-token: ENV/TEST_KEY}
  settings: {model: gpt-4o}
safety: {tools: {confirmable: false}}
%s`, srv.URL, strings.Join(extra, ""))
	if err := os.WriteFile(cart, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &BotBackend{Host: bot.Host{Environ: []string{"TEST_KEY=k", "HOME=" + dir}, Retry: &provider.RetryPolicy{}}, Cartridge: cart}
	t.Cleanup(func() { b.Close() })
	return b
}

// events records a run's events.
type events struct {
	mu  sync.Mutex
	all []engine.Event
}

func (e *events) OnEvent(ev engine.Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
}

func (e *events) of(k engine.Kind) []engine.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []engine.Event
	for _, ev := range e.all {
		if ev.Kind == k {
			out = append(out, ev)
		}
	}
	return out
}

type run struct {
	res    *engine.Result
	ev     *events
	dir    string
	g      *pipeline.Graph
	src    []byte
	cfg    engine.Config
	errors []pipeline.Diagnostic
}

// load parses a flow and fails the test on an error diagnostic.
func load(t testing.TB, src string) *pipeline.Graph {
	t.Helper()
	g, diags, err := pipeline.Load("flow.dot", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range diags {
		if d.Severity == pipeline.Error {
			t.Fatalf("%s", d.String("flow.dot"))
		}
	}
	return g
}

// runFlow runs src with the handlers of this package.
func runFlow(t testing.TB, src string, o Options, mod ...func(*engine.Config)) *run {
	t.Helper()
	g := load(t, src)
	ev := &events{}
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	cfg := engine.Config{Graph: g, Source: []byte(src), File: "flow.dot", LogsRoot: filepath.Join(t.TempDir(), "run"), Handlers: NewRegistry(o), Observer: ev,
		Sleep: func(context.Context, time.Duration) error { return nil }}
	for _, m := range mod {
		m(&cfg)
	}
	res, err := engine.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &run{res: res, ev: ev, dir: cfg.LogsRoot, g: g, src: []byte(src), cfg: cfg}
}

func (r *run) path() string { return strings.Join(r.res.CompletedNodes, ",") }

func (r *run) want(t testing.TB, st engine.Status, path string) {
	t.Helper()
	if r.res.Status != st || (path != "" && r.path() != path) {
		t.Fatalf("run ended %s (%s) through %s; want %s through %s", r.res.Status, r.res.FailureReason, r.path(), st, path)
	}
}

func (r *run) checkpoint(t testing.TB) *engine.Checkpoint {
	t.Helper()
	cp, err := engine.LoadCheckpoint(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

func read(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
