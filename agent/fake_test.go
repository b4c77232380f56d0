package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/tool"
)

// step is one scripted provider answer.
type step struct {
	chunks []string
	calls  []provider.ToolCall
	err    error // returned after the chunks
	usage  provider.Usage
}

// scripted is an in-memory provider.Provider that plays steps in order,
// then answers "done", and keeps every request it received.
type scripted struct {
	mu       sync.Mutex
	steps    []step
	requests []provider.Request
	// forever, when set, answers every request after the steps.
	forever func(n int) step
}

func (p *scripted) ID() string { return "fake" }

func (p *scripted) Complete(ctx context.Context, req provider.Request, onEvent func(provider.Event)) (*provider.Response, error) {
	p.mu.Lock()
	req.Messages = append([]provider.Message(nil), req.Messages...)
	p.requests = append(p.requests, req)
	n := len(p.requests)
	var s step
	switch {
	case len(p.steps) > 0:
		s, p.steps = p.steps[0], p.steps[1:]
	case p.forever != nil:
		s = p.forever(n)
	default:
		s = step{chunks: []string{"do", "ne"}}
	}
	p.mu.Unlock()
	resp := &provider.Response{}
	for _, c := range s.chunks {
		if onEvent != nil && req.Stream {
			onEvent(provider.Event{Kind: provider.TextDelta, Text: c})
		}
		resp.Text += c
	}
	if s.err != nil {
		return nil, s.err
	}
	resp.ToolCalls, resp.Usage = s.calls, s.usage
	return resp, nil
}

func (p *scripted) requestCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.requests)
}

func (p *scripted) request(i int) provider.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests[i]
}

// fakeTool is a Go tool with a scripted run.
type fakeTool struct {
	spec tool.Spec
	run  func(ctx context.Context, c tool.Call) (any, error)

	mu    sync.Mutex
	calls []tool.Call
}

func (t *fakeTool) Spec() tool.Spec { return t.spec }

func (t *fakeTool) Run(ctx context.Context, c tool.Call) (any, error) {
	t.mu.Lock()
	t.calls = append(t.calls, c)
	t.mu.Unlock()
	if t.run == nil {
		args, _ := json.Marshal(c.Arguments)
		return t.spec.Name + " ran with " + string(args), nil
	}
	return t.run(ctx, c)
}

func (t *fakeTool) runs() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.calls)
}

func newTool(name string, params map[string]any, run func(context.Context, tool.Call) (any, error)) *fakeTool {
	if params == nil {
		params = tool.DefaultParameters()
	}
	return &fakeTool{spec: tool.Spec{Name: name, Parameters: params}, run: run}
}

func sleeper(d time.Duration, out string) func(context.Context, tool.Call) (any, error) {
	return func(ctx context.Context, _ tool.Call) (any, error) {
		select {
		case <-time.After(d):
			return out, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// answers is a Confirmer that replies from a list, as a user typing the
// words at a terminal would (matched by the cartridge's rules, as the
// terminal front-end does), and keeps the texts it was asked about.
type answers struct {
	mu      sync.Mutex
	replies []string
	asked   []string
	// allows matches a reply; newHarness sets it to the cartridge's rules.
	allows func(string) bool
}

const noTerminal = "<no terminal>"

func (a *answers) Confirm(_ context.Context, _ tool.Call, text string) (bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.asked = append(a.asked, text)
	if len(a.replies) == 0 {
		return false, nil
	}
	r := a.replies[0]
	a.replies = a.replies[1:]
	if r == noTerminal {
		return false, nil
	}
	return a.allows(r), nil
}

// parse builds a cartridge from YAML text.
func parse(t *testing.T, src string) *cartridge.Cartridge {
	t.Helper()
	c, err := cartridge.Parse([]byte(src), "test.yml", cartridge.FormatYAML, os.LookupEnv)
	if err != nil {
		t.Fatalf("parse cartridge: %v", err)
	}
	return c
}

const unconfirmed = `
safety:
  tools:
    confirmable: false
provider:
  id: openai
`

const confirmed = `
provider:
  id: openai
`

// harness is an agent wired to the fakes, recording its events.
type harness struct {
	agent    *Agent
	provider *scripted
	mu       sync.Mutex
	events   []Event
}

func newHarness(t *testing.T, cart string, mode cartridge.Mode, p *scripted, c Confirmer, tools ...tool.Tool) *harness {
	t.Helper()
	h := &harness{provider: p}
	set := &tool.Set{}
	for _, x := range tools {
		set.Add(x)
	}
	cartridge := parse(t, cart)
	if ans, ok := c.(*answers); ok {
		ans.allows = func(r string) bool { return cartridge.Allows(mode, r) }
	}
	a := engine(cartridge, mode, p, set)
	a.Confirmer = c
	a.OnEvent = func(ev Event) {
		h.mu.Lock()
		h.events = append(h.events, ev)
		h.mu.Unlock()
	}
	h.agent = a
	return h
}

// engine is the loop of one exchange on c without a bot: the limits
// are those a bot gives an exchange on c with no history budget of the
// host's (bot's tests run exchanges through a bot, as every front-end).
func engine(c *cartridge.Cartridge, mode cartridge.Mode, p provider.Provider, tools *tool.Set) *Agent {
	return &Agent{Cartridge: c, Mode: mode, Provider: p, Tools: tools, Conversation: NewMemory(),
		MaxRounds: MaxRounds(c), MaxTokens: MaxTokens(c), LoopWindow: LoopWindow(c), ToolLimits: ToolLimits(c), Budget: Budget(c, 0), Limits: DefaultTruncation()}
}

// kinds returns the events of kind k.
func (h *harness) kinds(k EventKind) []Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Event
	for _, ev := range h.events {
		if ev.Kind == k {
			out = append(out, ev)
		}
	}
	return out
}

// feedback returns the feedback events as "action: text".
func (h *harness) feedback() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, ev := range h.events {
		if ev.Kind == Feedback {
			out = append(out, fmt.Sprintf("%s: %s", ev.Action, ev.Text))
		}
	}
	return out
}

// toolMessages returns the tool results of request i as "id name: content".
func toolMessages(req provider.Request) []string {
	var out []string
	for _, m := range req.Messages {
		if m.Role == provider.RoleTool {
			out = append(out, fmt.Sprintf("%s %s: %s", m.ToolCallID, m.ToolName, m.Content))
		}
	}
	return out
}

func call(id, name, args string) provider.ToolCall {
	return provider.ToolCall{ID: id, Name: name, Arguments: args}
}

func ask(t *testing.T, h *harness, input string) *Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := h.agent.Ask(ctx, input)
	if err != nil {
		t.Fatalf("Ask(%q): %v", input, err)
	}
	return res
}

func equal(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n---\n") != strings.Join(want, "\n---\n") {
		t.Errorf("%s:\ngot  %q\nwant %q", what, got, want)
	}
}
