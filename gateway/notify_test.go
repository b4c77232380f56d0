package gateway

import (
	"context"
	"fmt"
	"os"
	"strings"
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

// TestStoppedTurnLeavesNothing: /stop ends the running turn and nothing
// of it stays in the session, in memory or in its file (nanobot saves
// nothing of a cancelled turn); the turns before it are kept.
func TestStoppedTurnLeavesNothing(t *testing.T) {
	h := newHarness(t)
	h.r.started = make(chan string, 10)
	h.send(t, tg("before"))
	<-h.r.started
	h.next(t)
	sess, err := h.g.Sessions.Get(t.Context(), "telegram:1")
	if err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(sess.Path)
	if err != nil {
		t.Fatal(err)
	}
	h.send(t, tg("slow"))
	<-h.r.started
	h.send(t, tg("/stop"))
	if m := h.next(t); m.Content != "⏹ Stopped 1 task(s)." {
		t.Fatal(m.Content)
	}
	h.send(t, tg("after"))
	<-h.r.started
	h.next(t)
	var texts []string
	for _, ev := range sess.History() {
		texts = append(texts, fmt.Sprint(ev.Message))
	}
	if strings.Join(texts, "|") != "before|echo: before|after|echo: after" {
		t.Errorf("history %q: the stopped turn's message stayed", texts)
	}
	data, _ := os.ReadFile(sess.Path)
	if !strings.HasPrefix(string(data), string(before)) || strings.Contains(string(data), `"slow"`) {
		t.Errorf("file:\n%s", data)
	}
}
