package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
	_ "github.com/nbots/nb/provider/openai"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/state"
)

// A turn the round limit stops is answered with the notice, and the
// session keeps the conversation: the next turn goes on from it.
func TestBotRunnerRoundLimit(t *testing.T) {
	n := 0
	model := openaitest.New(func(tn providertest.Turn) providertest.Reply {
		if tn.LastUser() == "continue" && tn.Last().Role == "user" {
			return providertest.Reply{Chunks: []string{"went on"}}
		}
		n++
		return providertest.Reply{Calls: []providertest.Call{{ID: fmt.Sprint("c", n), Name: "ping", Arguments: fmt.Sprintf(`{"n":%d}`, n)}}}
	})
	fake := httptest.NewServer(model)
	t.Cleanup(fake.Close)
	src := fmt.Sprintf("provider: {id: openai, credentials: {address: %q, access-token: k}, settings: {model: m}}\nsafety: {tools: {confirmable: false, rounds: 2}, functions: {sandboxed: true}}\ntools:\n  - name: ping\n    lua: return 'pong'\n", fake.URL)
	cart, err := cartridge.Parse([]byte(src), "", cartridge.FormatYAML, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bot.New(context.Background(), cart, bot.Host{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	conv := agent.NewMemory()
	words := strings.NewReplacer("safety.tools.rounds", "agents.defaults.maxToolIterations").Replace
	ans, err := BotRunner{Bot: b, Words: words}.Run(context.Background(), Turn{Conversation: conv, Input: "go"})
	if err != nil || !strings.HasPrefix(ans.Text, "stopped after 2 rounds of tool calls without an answer") {
		t.Fatalf("answer %q, error %v", ans.Text, err)
	}
	if !strings.Contains(ans.Text, "agents.defaults.maxToolIterations sets the limit") || strings.Contains(ans.Text, "safety.tools") {
		t.Fatalf("the notice names the cartridge's key, not the configuration's: %q", ans.Text)
	}
	ans, err = BotRunner{Bot: b}.Run(context.Background(), Turn{Conversation: conv, Input: "continue"})
	if err != nil || ans.Text != "went on" {
		t.Fatalf("after the limit: answer %q, error %v", ans.Text, err)
	}
}

// agents.defaults.contextWindowTokens bounds the request: with a 32k
// window (8k of it the answer's), a session of ~60k tokens is sent its
// newest turns only, tools' definitions and system text counted.
func TestBotRunnerPromptTokens(t *testing.T) {
	model := openaitest.New(providertest.Echo)
	fake := httptest.NewServer(model)
	t.Cleanup(fake.Close)
	src := fmt.Sprintf("provider: {id: openai, credentials: {address: %q, access-token: k}, settings: {model: claude-sonnet-4-5, max_tokens: 8192}}\nsafety: {tools: {confirmable: false}, functions: {sandboxed: true}}\ntools:\n  - name: ping\n    description: %q\n    lua: return 'pong'\n", fake.URL, strings.Repeat("Answers pong. ", 400))
	cart, err := cartridge.Parse([]byte(src), "", cartridge.FormatYAML, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bot.New(context.Background(), cart, bot.Host{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	conv := agent.NewMemory()
	for i := range 60 {
		q, a := fmt.Sprintf("question %d: %s", i, strings.Repeat("q", 2000)), fmt.Sprintf("answer %d: %s", i, strings.Repeat("a", 2000))
		conv.Append(state.Event{Who: state.RoleUser, Message: q, Input: &q}, state.Event{Who: state.RoleAI, Message: a})
	}
	const window, answer = 32768, 8192
	system := strings.Repeat("You are a helpful assistant. ", 300)
	ans, err := BotRunner{Bot: b, PromptTokens: window - answer - 1024}.Run(context.Background(), Turn{Conversation: conv, Input: "last question", System: system})
	if err != nil || ans.Text != "echo: last question" {
		t.Fatalf("answer %q, error %v", ans.Text, err)
	}
	body, _ := json.Marshal(model.Recorder.Last())
	sent := len(body)
	if sent/4 > window-answer {
		t.Fatalf("the request is ~%d tokens (%d bytes): it does not fit a %d-token window with %d for the answer", sent/4, sent, window, answer)
	}
	if !strings.Contains(string(body), "answer 59:") {
		t.Fatal("the newest turns were left out")
	}
}
