package chatgate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/channeltest"
	"github.com/nbots/nb/gateway/channel/telegram/botapi"
	"github.com/nbots/nb/gateway/channel/telegram/telegramtest"
	"github.com/nbots/nb/gateway/channels"
	"github.com/nbots/nb/gateway/config"
	"github.com/nbots/nb/pipeline"
	"github.com/nbots/nb/pipeline/chatgate"
	"github.com/nbots/nb/pipeline/engine"
	"github.com/nbots/nb/pipeline/handler"
)

const token = "123456789:AAE-secret_TOKEN-value"

var (
	alice = botapi.User{ID: 42, FirstName: "Alice", Username: "alice"} // the owner
	bob   = botapi.User{ID: 43, FirstName: "Bob", Username: "bob"}     // a stranger
	group = botapi.Chat{ID: -100, Type: botapi.Group, Title: "release"}
)

// gate is a Gate over a Telegram fake whose allowFrom names alice, and
// "*" (which must not let bob approve anything).
func gate(t *testing.T, allow string) (*telegramtest.Server, *chatgate.Gate) {
	t.Helper()
	fake, err := telegramtest.New(token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	raw := fmt.Sprintf(`{"enabled":true,"token":%q,"apiBase":%q,"allowFrom":%s,"pollTimeout":1}`, token, fake.URL, allow)
	chs := config.Channels{Each: map[string]json.RawMessage{"telegram": json.RawMessage(raw)}}
	g := chatgate.New(chs, channels.Builtin(), channeltest.Folders(t, channel.Env{}), nil)
	t.Cleanup(g.Close)
	return fake, g
}

func ctxOf(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func review(chat string) handler.Question {
	return handler.Question{ID: "review_gate-1", Text: "Review Changes", Type: handler.MultipleChoice, Stage: "review_gate",
		Options:  []handler.Option{{Key: "A", Label: "[A] Approve"}, {Key: "F", Label: "[F] Fix"}},
		Metadata: map[string]any{chatgate.Attr: "telegram:" + chat}}
}

type result struct {
	a   handler.Answer
	err error
}

func ask(ctx context.Context, g *chatgate.Gate, q handler.Question) chan result {
	out := make(chan result, 1)
	go func() {
		a, err := g.Ask(ctx, q)
		out <- result{a, err}
	}()
	return out
}

// TestOwnerAnswers: the question reaches the chat with its choices; a
// stranger's answer in the same group, the owner's answer in another
// chat and a remark that names no choice are not taken; the owner's
// answer is, and is acknowledged.
func TestOwnerAnswers(t *testing.T) {
	ctx := ctxOf(t)
	fake, g := gate(t, `["42", "*"]`)
	// Telegram knows the chats a bot was added to, or started in.
	fake.Post(botapi.Message{From: &alice, Chat: group, Text: "A", Date: time.Now().Add(-time.Hour).Unix()})
	res := ask(ctx, g, review("-100"))
	sent, err := fake.WaitSent(ctx, group.ID, 1)
	if err != nil {
		select {
		case r := <-res:
			t.Fatal(err, r)
		default:
		}
		t.Fatal(err)
	}
	q := sent[0].Text
	for _, want := range []string{"Review Changes", "[A] Approve", "[F] Fix", "Answer with one of A or F"} {
		if !strings.Contains(q, want) {
			t.Errorf("the question %q lacks %q", q, want)
		}
	}
	fake.Post(botapi.Message{From: &bob, Chat: group, Text: "A"})
	fake.Say(alice, "A") // her private chat, not the gate's
	fake.Post(botapi.Message{From: &alice, Chat: group, Text: "hmm, let me look"})
	sent, err = fake.WaitSent(ctx, group.ID, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sent[1].Text, "Answer with one of A or F") {
		t.Errorf("the reply to a remark = %q, want how to answer", sent[1].Text)
	}
	fake.Post(botapi.Message{From: &alice, Chat: group, Text: "f"})
	var r result
	select {
	case r = <-res:
	case <-ctx.Done():
		t.Fatal("no answer taken")
	}
	if r.err != nil || r.a.Value != "F" || r.a.Selected == nil || r.a.Selected.Label != "[F] Fix" {
		t.Fatalf("answer = %+v, %v; want alice's F (bob's A must be ignored)", r.a, r.err)
	}
	sent, _ = fake.WaitSent(ctx, group.ID, 3)
	if got := sent[len(sent)-1].Text; got != "Taken: [F] Fix." {
		t.Errorf("acknowledgement = %q", got)
	}
	if n := len(fake.Sent(alice.ID)); n != 0 {
		t.Errorf("the bot wrote %d messages in alice's private chat, want none", n)
	}
}

// TestTimeoutTakesDefault: without an owner's answer the question times
// out (the handler then takes human.default_choice); an owner's message
// dated before the question (a platform replaying what it had not
// confirmed) does not answer it.
func TestTimeoutTakesDefault(t *testing.T) {
	ctx := ctxOf(t)
	fake, g := gate(t, `["alice"]`)
	fake.Post(botapi.Message{From: &alice, Chat: group, Text: "A", Date: time.Now().Add(-time.Hour).Unix()})
	q := review("-100")
	q.Timeout = 1500 * time.Millisecond
	q.Default = &handler.Answer{Value: "F", Selected: &handler.Option{Key: "F", Label: "[F] Fix"}}
	res := ask(ctx, g, q)
	if _, err := fake.WaitSent(ctx, group.ID, 1); err != nil {
		t.Fatal(err)
	}
	fake.Post(botapi.Message{From: &bob, Chat: group, Text: "A"})
	fake.Post(botapi.Message{From: &alice, Chat: group, Text: "A", Date: time.Now().Add(-time.Hour).Unix()}) // delivered late
	r := <-res
	if r.err != nil || r.a.Value != handler.TimedOut {
		t.Fatalf("answer = %+v, %v; want TIMEOUT", r.a, r.err)
	}
	sent := fake.Sent(group.ID)
	if !strings.Contains(sent[0].Text, "Without an answer in 1.5s: [F] Fix.") {
		t.Errorf("the question %q does not say what a timeout takes", sent[0].Text)
	}
	if got := sent[len(sent)-1].Text; got != "No answer in time: taking the default, [F] Fix." {
		t.Errorf("last message = %q", got)
	}
}

// TestPipelineGate: a flow's gate with human.channel is answered from
// the chat (F, then A) and the run follows the answers, as the
// specification's Review example does over HTTP.
func TestPipelineGate(t *testing.T) {
	ctx := ctxOf(t)
	fake, g := gate(t, `["42"]`)
	src := []byte(`digraph Review {
	start [shape=Mdiamond]
	exit  [shape=Msquare]
	review_gate [shape=hexagon, label="Review Changes", human.channel="telegram:42"]
	start -> review_gate
	review_gate -> ship_it [label="[A] Approve"]
	review_gate -> fixes   [label="[F] Fix"]
	ship_it -> exit
	fixes -> review_gate
}`)
	gr, diags, err := pipeline.Load("review.dot", src)
	if err != nil || pipeline.HasErrors(diags) {
		t.Fatal(err, diags)
	}
	fake.Post(botapi.Message{From: &alice, Chat: botapi.Chat{ID: alice.ID, Type: botapi.Private}, Text: "/start", Date: time.Now().Add(-time.Minute).Unix()})
	reg := handler.NewRegistry(handler.Options{Interviewer: g})
	done := make(chan *engine.Result, 1)
	go func() {
		res, err := engine.Run(ctx, engine.Config{Graph: gr, Source: src, File: "review.dot", LogsRoot: t.TempDir(), Handlers: reg})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	if _, err := fake.WaitSent(ctx, alice.ID, 1); err != nil {
		t.Fatal(err)
	}
	fake.Say(alice, "F")
	// The acknowledgement, then the second question.
	if _, err := fake.WaitSent(ctx, alice.ID, 3); err != nil {
		t.Fatal(err)
	}
	fake.Say(alice, "Approve")
	res := <-done
	if res == nil || res.Status != engine.Success {
		t.Fatalf("result %+v", res)
	}
	want := []string{"start", "review_gate", "fixes", "review_gate", "ship_it", "exit"}
	if !slices.Equal(res.CompletedNodes, want) {
		t.Errorf("completed %v, want %v", res.CompletedNodes, want)
	}
}

// TestConfigErrors: a gate that cannot be asked fails with what to fix.
func TestConfigErrors(t *testing.T) {
	ctx := ctxOf(t)
	_, g := gate(t, `["*"]`)
	for _, c := range []struct{ target, want string }{
		{"telegram:42", `channels.telegram.allowFrom in the gateway configuration names nobody ("*" does not count)`},
		{"slack:C1", "channels.slack is not in the gateway configuration"},
		{"pigeon:1", `no channel "pigeon"`},
		{"telegram", `want "<channel>:<chat id>"`},
	} {
		q := review("")
		q.Metadata[chatgate.Attr] = c.target
		_, err := g.Ask(ctx, q)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.target, err, c.want)
		}
	}
	// Without human.channel, the fallback answers.
	q := review("")
	delete(q.Metadata, chatgate.Attr)
	if a, err := g.Ask(ctx, q); err != nil || a.Value != "A" {
		t.Errorf("fallback: %+v, %v; want AutoApprove's A", a, err)
	}
}
