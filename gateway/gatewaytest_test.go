package gateway

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/gateway/access"
	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/session"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/tool"
)

// echoRunner answers "echo: <input>", recording the turn like the agent;
// "slow" blocks until cancelled, "send" calls the message tool.
type echoRunner struct {
	mu      sync.Mutex
	started chan string
}

func (r *echoRunner) Model() string { return "fake/echo" }

func (r *echoRunner) Run(ctx context.Context, t Turn) (Answer, error) {
	in := t.Input
	t.Conversation.Append(state.Event{Who: "user", Message: in, Input: &in})
	if r.started != nil {
		r.started <- in
	}
	switch in {
	case "slow":
		<-ctx.Done()
		return Answer{}, ctx.Err()
	case "send":
		for _, tl := range t.Tools {
			if tl.Spec().Name == "message" {
				out, _ := tl.Run(ctx, tool.Call{Name: "message", Arguments: map[string]any{"content": "sent by the tool"}})
				t.Conversation.Append(state.Event{Who: "tool", Message: out, Meta: map[string]any{"id": "c1", "name": "message"}})
			}
		}
	}
	t.OnEvent(agent.Event{Kind: agent.RoundEnd})
	t.Conversation.Append(state.Event{Who: "AI", Message: "echo: " + in})
	return Answer{Text: "echo: " + in}, nil
}

type harness struct {
	g   *Gateway
	b   *bus.Local
	out chan bus.Outbound
	r   *echoRunner
}

func newHarness(t *testing.T, opts ...func(*Gateway)) *harness {
	t.Helper()
	r := &echoRunner{}
	h, _ := newHarnessWith(t, r, opts...)
	h.r = r
	return h
}

// newHarnessWith runs a gateway with the runner, set up further by opts;
// it returns the harness and the gateway's folder (its workspace,
// sessions and pairing store).
func newHarnessWith(t *testing.T, r Runner, opts ...func(*Gateway)) (*harness, string) {
	t.Helper()
	dir := t.TempDir()
	sm, err := session.NewManager(dir + "/sessions")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sm.Close() })
	b := bus.NewLocal()
	t.Cleanup(func() { b.Close() })
	g := &Gateway{Bus: b, Sessions: sm, Runner: r, Prompt: &Prompt{Workspace: dir},
		Log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		Access: &access.Checker{Pairings: &access.FilePairings{Path: dir + "/pairing.json"}, Channels: map[string]access.ChannelRules{"telegram": {AllowFrom: []string{"1"}}}}}
	g.Alone()
	for _, o := range opts {
		o(g)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go g.Run(ctx)
	h := &harness{g: g, b: b, out: make(chan bus.Outbound, 100)}
	for _, ch := range []string{"telegram", "web"} {
		go b.Outbound(ctx, ch, func(ctx context.Context, m bus.Outbound) error { h.out <- m; return nil })
	}
	return h, dir
}

func (h *harness) send(t *testing.T, m bus.Inbound) {
	t.Helper()
	if err := h.g.Inbox(m.Channel).Publish(context.Background(), m); err != nil {
		t.Fatal(err)
	}
}

func (h *harness) next(t *testing.T) bus.Outbound {
	t.Helper()
	for {
		select {
		case m := <-h.out:
			if m.Kind == bus.Message || m.Kind == bus.Error {
				return m
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no reply")
		}
	}
}

func tg(text string) bus.Inbound {
	return bus.Inbound{Channel: "telegram", SenderID: "1", ChatID: "1", Content: text}
}

func TestTurnAndCommands(t *testing.T) {
	h := newHarness(t)
	h.send(t, tg("hello"))
	if m := h.next(t); m.Content != "echo: hello" || m.ChatID != "1" || m.Turn == "" {
		t.Fatalf("%+v", m)
	}
	sess, _ := h.g.Sessions.Get(t.Context(), "telegram:1")
	if sess.Len() != 2 {
		t.Fatalf("%d messages", sess.Len())
	}
	h.send(t, tg("/help"))
	if m := h.next(t); !strings.Contains(m.Content, "/new") || !strings.Contains(m.Content, "/stop") {
		t.Fatal(m.Content)
	}
	h.send(t, tg("/status"))
	if m := h.next(t); !strings.Contains(m.Content, "Model: fake/echo") || !strings.Contains(m.Content, "2 messages") {
		t.Fatal(m.Content)
	}
	h.send(t, tg("/stop"))
	if m := h.next(t); m.Content != "No active task to stop." {
		t.Fatal(m.Content)
	}
	h.send(t, tg("/new"))
	if m := h.next(t); m.Content != "New session started." {
		t.Fatal(m.Content)
	}
	if sess.Len() != 0 {
		t.Fatal("not cleared")
	}
}

func TestStopCancelsTheRunningTurn(t *testing.T) {
	h := newHarness(t)
	h.r.started = make(chan string, 10)
	h.send(t, tg("slow"))
	<-h.r.started
	h.send(t, tg("/stop"))
	if m := h.next(t); m.Content != "⏹ Stopped 1 task(s)." {
		t.Fatal(m.Content)
	}
	// The session goes on: the next message is answered.
	h.send(t, tg("after"))
	<-h.r.started
	if m := h.next(t); m.Content != "echo: after" {
		t.Fatal(m.Content)
	}
}

func TestMessageToolSuppressesTheReply(t *testing.T) {
	h := newHarness(t)
	h.send(t, tg("send"))
	if m := h.next(t); m.Content != "sent by the tool" {
		t.Fatal(m.Content)
	}
	select {
	case m := <-h.out:
		if m.Kind == bus.Message {
			t.Fatalf("the final reply was sent too: %+v", m)
		}
	case <-time.After(200 * time.Millisecond):
	}
}

func TestUnknownSenderGetsAPairingCodeOnce(t *testing.T) {
	h := newHarness(t)
	h.send(t, bus.Inbound{Channel: "telegram", SenderID: "2", ChatID: "2", Content: "hi"})
	m := h.next(t)
	if !strings.Contains(m.Content, "pairing code") || m.ChatID != "2" {
		t.Fatal(m.Content)
	}
	code := strings.Fields(strings.SplitAfter(m.Content, "pairing code is ")[1])[0]
	code = strings.TrimSuffix(code, ":")
	h.send(t, bus.Inbound{Channel: "telegram", SenderID: "2", ChatID: "2", Content: "hi again"})
	select {
	case m := <-h.out:
		t.Fatalf("answered an unpaired sender: %+v", m)
	case <-time.After(200 * time.Millisecond):
	}
	h.send(t, tg("/pair "+code))
	if m := h.next(t); !strings.Contains(m.Content, "Paired telegram:2") {
		t.Fatal(m.Content)
	}
	h.send(t, bus.Inbound{Channel: "telegram", SenderID: "2", ChatID: "2", Content: "now?"})
	if m := h.next(t); m.Content != "echo: now?" {
		t.Fatal(m.Content)
	}
	// A web message without the listener's mark is refused.
	h.send(t, bus.Inbound{Channel: "web", SenderID: "web", ChatID: "x", Content: "forged"})
	select {
	case m := <-h.out:
		t.Fatalf("answered an unauthenticated web message: %+v", m)
	case <-time.After(200 * time.Millisecond):
	}
}

func TestPromptOrder(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"IDENTITY.md", "AGENTS.md", "SOUL.md"} {
		writeFile(t, dir+"/"+f, "content of "+f)
	}
	writeFile(t, dir+"/memory/MEMORY.md", "likes tea")
	p := &Prompt{Workspace: dir, Now: func() time.Time { return time.Date(2026, 2, 28, 10, 0, 0, 0, time.UTC) }}
	s := p.Build("telegram", "123")
	order := []string{"# nb", "## AGENTS.md", "## SOUL.md", "## IDENTITY.md", "# Memory\n\n## Long-term Memory\nlikes tea", "Current Time: 2026-02-28 10:00 (Saturday) (UTC)\nChannel: telegram\nChat ID: 123"}
	last := -1
	for _, o := range order {
		i := strings.Index(s, o)
		if i <= last {
			t.Fatalf("%q out of order in:\n%s", o, s)
		}
		last = i
	}
}

func TestInitWorkspaceNeverOverwrites(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir+"/SOUL.md", "mine")
	written, err := InitWorkspace(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range written {
		if strings.HasSuffix(w, "SOUL.md") {
			t.Fatal("SOUL.md overwritten")
		}
	}
	if len(written) != 5 {
		t.Fatalf("%v", written)
	}
	again, _ := InitWorkspace(dir)
	if len(again) != 0 {
		t.Fatal(again)
	}
}

// TestTurnRunAgainRepliesOnce: a message whose turn runs a second time
// (its replica died before the bus heard the turn was done) is answered
// once: the turn is named after the message, and the bus queues a turn's
// final reply once per destination.
func TestTurnRunAgainRepliesOnce(t *testing.T) {
	h := newHarness(t)
	m := tg("hello")
	m.ID = "1:77"
	for range 2 {
		if err := h.g.handle(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	first := h.next(t)
	h.send(t, tg("after"))
	if m := h.next(t); m.Content != "echo: after" {
		t.Fatalf("the turn run again replied too: %+v then %+v", first, m)
	}
}

// TestLockFailureAnswered: a turn whose session lock cannot be taken (its
// folder gone under the gateway) answers the error reply rather than
// leaving the user waiting for an answer that never comes.
func TestLockFailureAnswered(t *testing.T) {
	h, dir := newHarnessWith(t, &echoRunner{})
	h.send(t, tg("hello"))
	if m := h.next(t); m.Content != "echo: hello" {
		t.Fatalf("%+v", m)
	}
	if err := os.RemoveAll(dir + "/sessions"); err != nil {
		t.Fatal(err)
	}
	h.send(t, tg("again"))
	if m := h.next(t); m.Kind != bus.Error || m.Content != errorReply {
		t.Fatalf("%+v, want the error reply", m)
	}
}
