package gateway

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/gateway/budget"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/state"
)

// costlyRunner makes one model call per turn as the agent announces it:
// a request of 16 estimated tokens that costs 16 in and 10 out.
type costlyRunner struct{}

func (costlyRunner) Model() string { return "fake/costly" }

func (costlyRunner) Run(ctx context.Context, t Turn) (Answer, error) {
	in := t.Input
	t.Conversation.Append(state.Event{Who: "user", Message: in, Input: &in})
	t.OnEvent(agent.Event{Kind: agent.RoundStart, Round: 1, ContextTokens: 16})
	select {
	case <-ctx.Done():
		return Answer{}, ctx.Err()
	case <-time.After(20 * time.Millisecond): // the calls overlap
	}
	u := provider.Usage{InputTokens: 16, OutputTokens: 10}
	t.OnEvent(agent.Event{Kind: agent.RoundEnd, Round: 1, Usage: u})
	t.Conversation.Append(state.Event{Who: "AI", Message: "answer"})
	return Answer{Text: "answer", Usage: u}, nil
}

// 50 chats at once against dailyTokens 100 were all answered (1,300
// tokens): each call now reserves before it starts, so at most the
// budget and one call's answer is spent.
func TestBudgetUnderConcurrentTurns(t *testing.T) {
	ledger := &budget.Ledger{Limits: budget.Limits{DailyTokens: 100}}
	h, _ := newHarnessWith(t, costlyRunner{}, func(g *Gateway) { g.Budget, g.AnswerTokens = ledger, 10 })
	const n = 50
	for i := range n {
		m := tg(fmt.Sprint("question ", i))
		m.ChatID = fmt.Sprint(1000 + i)
		h.send(t, m)
	}
	answered, refused := 0, 0
	for range n {
		m := h.next(t)
		switch {
		case m.Content == "answer":
			answered++
		case strings.Contains(m.Content, "daily token budget"):
			refused++
		default:
			t.Errorf("reply %q", m.Content)
		}
	}
	used := ledger.Report("").TodayTotal
	t.Logf("%d answered, %d refused, %d tokens of 100", answered, refused, used)
	if answered == 0 || used > 100+10 || used != 26*answered {
		t.Errorf("%d answered: %d tokens of 100 (at most 110 allowed)", answered, used)
	}
}
