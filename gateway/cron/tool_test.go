package cron

import (
	"context"
	"testing"
	"time"

	"github.com/nbots/nb/tool"
)

// TestTool is nanobot's cron tool, answer by answer.
func TestTool(t *testing.T) {
	st := NewStore(t.TempDir())
	now := time.Date(2026, 2, 12, 8, 0, 0, 0, time.UTC)
	tl := &Tool{Store: st, Channel: "telegram", ChatID: "42", Now: func() time.Time { return now }}
	run := func(args map[string]any) string {
		t.Helper()
		out, err := tl.Run(context.Background(), tool.Call{Name: "cron", Arguments: args})
		if err != nil {
			t.Fatal(err)
		}
		return out.(string)
	}
	expect := func(args map[string]any, want string) {
		t.Helper()
		if got := run(args); got != want {
			t.Errorf("%v: got %q, want %q", args, got, want)
		}
	}
	expect(map[string]any{"action": "list"}, "No scheduled jobs.")
	expect(map[string]any{"action": "add", "message": "x", "every_seconds": 60.0, "tz": "UTC"}, "Error: tz can only be used with cron_expr")
	expect(map[string]any{"action": "add", "message": "x", "cron_expr": "0 9 * * *", "tz": "Mars/Base"}, "Error: unknown timezone 'Mars/Base'")
	expect(map[string]any{"action": "add", "message": "x"}, "Error: either every_seconds, cron_expr, or at is required")
	expect(map[string]any{"action": "add"}, "Error: message is required for add")
	if f, _ := st.Load(); len(f.Jobs) != 0 {
		t.Fatalf("a refused job was saved: %+v", f.Jobs)
	}
	run(map[string]any{"action": "add", "message": "Stand-up reminder for the whole team, every weekday", "cron_expr": "0 9 * * 1-5", "tz": "America/Vancouver"})
	run(map[string]any{"action": "add", "message": "drink water", "every_seconds": 7200.0})
	run(map[string]any{"action": "add", "message": "call mum", "at": "2026-02-12T10:30:00"})
	f, _ := st.Load()
	if len(f.Jobs) != 3 || f.Jobs[0].Name != "Stand-up reminder for the whol" || f.Jobs[0].State.NextRunAtMs == nil ||
		*f.Jobs[0].Payload.To != "42" || *f.Jobs[0].Payload.Channel != "telegram" || !f.Jobs[0].Payload.Deliver || !f.Jobs[2].DeleteAfterRun {
		t.Fatalf("jobs: %+v", f.Jobs)
	}
	expect(map[string]any{"action": "list"}, "Scheduled jobs:\n- Stand-up reminder for the whol (id: "+f.Jobs[0].ID+", cron: 0 9 * * 1-5 (America/Vancouver))\n- drink water (id: "+f.Jobs[1].ID+", every 2h)\n- call mum (id: "+f.Jobs[2].ID+", at 2026-02-12T10:30:00 (UTC))")
	expect(map[string]any{"action": "remove", "job_id": f.Jobs[1].ID}, "Removed job "+f.Jobs[1].ID)
	expect(map[string]any{"action": "remove", "job_id": f.Jobs[1].ID}, "Job "+f.Jobs[1].ID+" not found")
	tl.InCronJob = true
	expect(map[string]any{"action": "add", "message": "x", "every_seconds": 60.0}, "Error: cannot schedule new jobs from within a cron job execution")
	tl.InCronJob, tl.ChatID = false, ""
	expect(map[string]any{"action": "add", "message": "x", "every_seconds": 60.0}, "Error: no session context (channel/chat_id)")
}
