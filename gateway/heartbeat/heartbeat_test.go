package heartbeat

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbots/nb/gateway/replica"
)

// runDay runs the service for 24 hours of a synctest bubble's clock and
// returns how many beats reached Execute (each would be at least one
// model request).
func runDay(t *testing.T, content *string) (n int, prompts []string) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		if content != nil {
			os.WriteFile(filepath.Join(dir, "HEARTBEAT.md"), []byte(*content), 0o600)
		}
		time.Sleep(time.Until(time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)))
		var calls atomic.Int32
		s := &Service{Workspace: dir, Interval: 1800 * time.Second, Claims: &replica.Local{}, Execute: func(_ context.Context, p string) error {
			calls.Add(1)
			prompts = append(prompts, p)
			return nil
		}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- s.Run(ctx) }()
		time.Sleep(24 * time.Hour)
		synctest.Wait() // the beat due now is done
		cancel()
		<-done
		n = int(calls.Load())
	})
	return n, prompts
}

// TestIdleDayCostsNothing: 24 hours of beats every 30 minutes make no
// model request when HEARTBEAT.md is absent, empty, the template, only
// comments or only checked tasks.
func TestIdleDayCostsNothing(t *testing.T) {
	str := func(s string) *string { return &s }
	for name, content := range map[string]*string{
		"absent":             nil,
		"empty":              str(""),
		"blank":              str("\n\n  \n"),
		"template":           str(Template),
		"template with CRLF": str(strings.ReplaceAll(Template, "\n", "\r\n")),
		"checked only":       str("# Heartbeat Tasks\n\n## Active Tasks\n\n- [x] Water the plants\n  every Monday\n- [X] Call mum\n\n## Completed\n\n- Pay rent\n"),
		"completed only":     str("## Active Tasks\n\n## Completed\n\n- [ ] left here by mistake\n"),
	} {
		t.Run(name, func(t *testing.T) {
			if n, _ := runDay(t, content); n != 0 {
				t.Errorf("%d model calls in 24 h, want 0", n)
			}
		})
	}
	t.Run("a task", func(t *testing.T) {
		c := strings.Replace(Template, "<!-- Add your periodic tasks below this line -->\n", "<!-- Add your periodic tasks below this line -->\n- [ ] Check the weather in Lisbon\n- [x] Done already\n", 1)
		n, prompts := runDay(t, &c)
		if n != 48 {
			t.Fatalf("%d beats in 24 h, want 48", n)
		}
		want := "[Heartbeat] Current Time: 2026-11-26 00:30 (Thursday) (UTC)\nThese are the unchecked tasks of HEARTBEAT.md in your workspace. Work on them now. If nothing needs the user's attention, answer in one short sentence.\n\n## Active Tasks\n\n- [ ] Check the weather in Lisbon"
		if prompts[0] != want {
			t.Errorf("prompt:\n%q\nwant\n%q", prompts[0], want)
		}
	})
}

func TestTasks(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"- water the plants\n", "- water the plants"},
		{"# Tasks\n\n1. first\n2. [x] second\n", "1. first"},
		{"## Active Tasks\n\n- [ ] a\n  - [x] a.1\n    detail of a.1\n  - [ ] a.2\n\n## Completed\n- [ ] z\n", "## Active Tasks\n\n- [ ] a\n  - [ ] a.2"},
		{"## Active Tasks\n\n### Weekly\nCheck the backups on Sunday.\n\n## Done\n- x\n", "## Active Tasks\n\n### Weekly\nCheck the backups on Sunday."},
		{"## Active Tasks\n<!-- - [ ] commented out -->\n- [ ]\n", ""},
	} {
		if got := Tasks(tc.in); got != tc.want {
			t.Errorf("Tasks(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestPromptBudget: a huge HEARTBEAT.md still makes a prompt of at most
// MaxPromptTokens, ending with where the rest is.
func TestPromptBudget(t *testing.T) {
	var b strings.Builder
	b.WriteString("## Active Tasks\n")
	for i := range 50_000 {
		b.WriteString("- [ ] task number ")
		b.WriteString(strings.Repeat("é", i%40))
		b.WriteString("\n")
	}
	p, ok := Prompt(b.String(), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	if !ok {
		t.Fatal("no prompt")
	}
	if n := EstimateTokens(p); n > MaxPromptTokens {
		t.Errorf("prompt of %d tokens, at most %d", n, MaxPromptTokens)
	}
	if !strings.HasSuffix(p, "more lines: read HEARTBEAT.md)") || !strings.Contains(p, "- [ ] task number ééé") {
		t.Errorf("prompt ends %q", p[len(p)-80:])
	}
}

// TestClaimedOnceAcrossReplicas: two replicas beating on the same clock
// with shared claims beat once per interval between them.
func TestClaimedOnceAcrossReplicas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "HEARTBEAT.md"), []byte("- [ ] water the plants\n"), 0o600)
		time.Sleep(time.Until(time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)))
		var calls atomic.Int32
		claims := &replica.Local{}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 2)
		for range 2 {
			s := &Service{Workspace: dir, Interval: 1800 * time.Second, Claims: claims, Execute: func(context.Context, string) error {
				calls.Add(1)
				return nil
			}}
			go func() { done <- s.Run(ctx) }()
		}
		time.Sleep(10 * 1800 * time.Second)
		synctest.Wait() // the beats due now are done
		cancel()
		<-done
		<-done
		if n := calls.Load(); n != 10 {
			t.Fatalf("%d beats in 10 intervals, want 10", n)
		}
	})
}
