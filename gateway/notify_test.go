package gateway

import (
	"context"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/access"
)

// TestNotifyGatesBackgroundAnswers: a delivered cron or heartbeat turn
// whose Notify says no (nanobot's evaluate_response) sends nothing; the
// answer is still returned and kept in its session.
func TestNotifyGatesBackgroundAnswers(t *testing.T) {
	h := newHarness(t)
	var asked string
	ans, err := h.g.RunDirect(context.Background(), Direct{Entry: access.Cron, SessionKey: "cron:1", Channel: "telegram", ChatID: "1",
		Content: "all quiet?", Source: SourceCron, Deliver: true,
		Notify: func(_ context.Context, answer string) bool { asked = answer; return false }})
	if err != nil {
		t.Fatal(err)
	}
	if ans != "echo: all quiet?" || asked != ans {
		t.Fatalf("answer %q, the gate was asked about %q", ans, asked)
	}
	select {
	case m := <-h.out:
		t.Fatalf("sent though the gate said no: %+v", m)
	case <-time.After(200 * time.Millisecond):
	}
	if _, err := h.g.RunDirect(context.Background(), Direct{Entry: access.Cron, SessionKey: "cron:1", Channel: "telegram", ChatID: "1",
		Content: "the server is down", Source: SourceCron, Deliver: true,
		Notify: func(context.Context, string) bool { return true }}); err != nil {
		t.Fatal(err)
	}
	if m := h.next(t); m.Content != "echo: the server is down" {
		t.Fatalf("%+v", m)
	}
}
