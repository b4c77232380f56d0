package cron

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/nbots/nb/gateway/replica"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbots/nb/tool"
)

// manyDue writes a jobs.json of n jobs, every one due now.
func manyDue(t testing.TB, st *Store, n int, now time.Time) {
	t.Helper()
	f := &File{Version: 1}
	for i := range n {
		j, err := NewJob(Spec{Name: fmt.Sprintf("job %d", i), Message: "remind me of " + strings.Repeat("things ", 40), Every: time.Hour, Deliver: true, Channel: "telegram", To: "42"}, now.Add(-2*time.Hour), nil)
		if err != nil {
			t.Fatal(err)
		}
		j.ID = fmt.Sprintf("%08x", i)
		f.Jobs = append(f.Jobs, j)
	}
	os.MkdirAll(filepath.Dir(st.Path), 0o700)
	if err := st.save(f); err != nil {
		t.Fatal(err)
	}
}

// TestManyJobsRunFast: 5,000 jobs due at once all run within seconds.
// Each run used to rewrite the whole jobs.json (100,000 jobs, 44 MB, ran
// at 0.55 jobs/s); a run's result is now one line appended to
// runs.jsonl, folded into jobs.json by the next tick.
func TestManyJobsRunFast(t *testing.T) {
	const n = 5000
	st := NewStore(t.TempDir())
	// Real time: the test measures how fast the jobs run.
	manyDue(t, st, n, time.Now())
	var ran atomic.Int32
	s := &Scheduler{Store: st, Claims: &replica.Local{}, RunJob: func(context.Context, Job) error {
		if ran.Add(1)%2 == 0 {
			return fmt.Errorf("provider down")
		}
		return nil
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := s.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	d := time.Since(start)
	if ran.Load() != n {
		t.Fatalf("%d of %d jobs ran in %s", ran.Load(), n, d)
	}
	t.Logf("%d jobs in %s: %.0f jobs/s", n, d, float64(n)/d.Seconds())
	// How the runs went is known at once, without jobs.json rewritten
	// per run ...
	f, err := st.Load()
	if err != nil {
		t.Fatal(err)
	}
	ok, failed := 0, 0
	for _, j := range f.Jobs {
		switch {
		case j.State.LastStatus == nil:
		case *j.State.LastStatus == "ok":
			ok++
		case *j.State.LastStatus == "error" && j.State.LastError != nil && *j.State.LastError == "provider down":
			failed++
		}
	}
	if ok != n/2 || failed != n/2 {
		t.Errorf("%d ok, %d failed: want %d each", ok, failed, n/2)
	}
	// ... and the next edit folds it into jobs.json, nanobot's file.
	if err := st.Edit(ctx, func(*File) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(st.runsPath()); !os.IsNotExist(err) {
		t.Errorf("runs.jsonl left after the edit: %v", err)
	}
	data, _ := os.ReadFile(st.Path)
	var raw struct {
		Jobs []struct {
			State struct {
				LastStatus *string `json:"lastStatus"`
			} `json:"state"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(data, &raw); err != nil || len(raw.Jobs) != n || raw.Jobs[0].State.LastStatus == nil {
		t.Fatalf("jobs.json after the edit: %v, %d jobs", err, len(raw.Jobs))
	}
}

// BenchmarkTickManyJobs reports how many jobs a second the scheduler runs
// when 10,000 are due (the runs themselves cost nothing here).
func BenchmarkTickManyJobs(b *testing.B) {
	const n = 10_000
	var total time.Duration
	for range b.N {
		b.StopTimer()
		st := NewStore(b.TempDir())
		manyDue(b, st, n, time.Now())
		s := &Scheduler{Store: st, Claims: &replica.Local{}, RunJob: func(context.Context, Job) error { return nil }}
		b.StartTimer()
		start := time.Now()
		if _, err := s.Tick(context.Background()); err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
	}
	b.ReportMetric(float64(n*b.N)/total.Seconds(), "jobs/s")
}

// TestMaxJobs: the cron tool refuses a job past the store's cap, saying
// what to do; removing one makes room.
func TestMaxJobs(t *testing.T) {
	st := NewStore(t.TempDir())
	st.MaxJobs = 3
	now := time.Date(2026, 2, 12, 8, 0, 0, 0, time.UTC)
	tl := &Tool{Store: st, Channel: "telegram", ChatID: "42", Now: func() time.Time { return now }}
	add := func() string {
		out, err := tl.Run(context.Background(), tool.Call{Name: "cron", Arguments: map[string]any{"action": "add", "message": "drink water", "every_seconds": float64(60)}})
		if err != nil {
			t.Fatal(err)
		}
		return out.(string)
	}
	for range 3 {
		if got := add(); !strings.HasPrefix(got, "Created job") {
			t.Fatal(got)
		}
	}
	if got := add(); got != "Error: there are already 3 cron jobs, the most this workspace may have (gateway.limits.cronJobs): remove some first (nb gateway cron remove ID, or the cron tool's remove)" {
		t.Fatalf("the fourth job: %q", got)
	}
	f, _ := st.Load()
	if len(f.Jobs) != 3 {
		t.Fatalf("%d jobs saved", len(f.Jobs))
	}
	if _, err := tl.Run(context.Background(), tool.Call{Name: "cron", Arguments: map[string]any{"action": "remove", "job_id": f.Jobs[0].ID}}); err != nil {
		t.Fatal(err)
	}
	if got := add(); !strings.HasPrefix(got, "Created job") {
		t.Fatal(got)
	}
}
