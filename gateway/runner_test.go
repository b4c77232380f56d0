package gateway

import (
	"context"
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
