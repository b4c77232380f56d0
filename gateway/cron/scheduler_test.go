package cron

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbots/nb/gateway/replica"
	"github.com/nbots/nb/internal/testbuf"
)

// runs records the runs of jobs, by job id.
type runs struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func (r *runs) run(_ context.Context, j Job) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.at == nil {
		r.at = map[string][]time.Time{}
	}
	r.at[j.ID] = append(r.at[j.ID], time.Now())
	return nil
}

func (r *runs) get(id string) []time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]time.Time(nil), r.at[id]...)
}

// sleepUntil moves a synctest bubble's clock to at.
func sleepUntil(at time.Time) { time.Sleep(time.Until(at)) }

func addJob(t *testing.T, st *Store, spec Spec, now time.Time) Job {
	t.Helper()
	j, err := NewJob(spec, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Edit(context.Background(), func(f *File) error {
		f.Jobs = append(f.Jobs, j)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return j
}

// TestTransitionDays steps a fake clock minute by minute through the days
// of real transitions and counts the runs of a half-hourly job: one per
// wall-clock slot, the skipped slots folded into the first instant after
// the gap, the repeated ones not run again; restarting the scheduler
// every 97 minutes changes nothing.
func TestTransitionDays(t *testing.T) {
	for _, tc := range []struct {
		zone  string
		day   time.Time // local midnight, in zone
		runs  int
		dupOK bool
	}{
		{"America/New_York", time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC), 46, false},  // 23 h; 02:00, 02:30 -> 03:00
		{"America/New_York", time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), 48, false}, // 25 h
		{"Europe/London", time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC), 46, false},
		{"Europe/London", time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC), 48, false},
		{"Australia/Lord_Howe", time.Date(2026, 10, 4, 0, 0, 0, 0, time.UTC), 47, false}, // 23.5 h; 02:00 -> 02:30
		{"Australia/Lord_Howe", time.Date(2026, 4, 5, 0, 0, 0, 0, time.UTC), 48, false},  // 24.5 h
	} {
		t.Run(tc.zone+tc.day.Format("-01-02"), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				loc := mustZone(t, tc.zone)
				start := time.Date(tc.day.Year(), tc.day.Month(), tc.day.Day(), 0, 0, 0, 0, loc)
				end := time.Date(tc.day.Year(), tc.day.Month(), tc.day.Day()+1, 0, 0, 0, 0, loc)
				sleepUntil(start.Add(-time.Minute))
				st := NewStore(t.TempDir())
				r := &runs{}
				j := addJob(t, st, Spec{Name: "half-hourly", Message: "m", Cron: "0,30 * * * *", TZ: tc.zone}, time.Now())
				s := &Scheduler{Store: st, Claims: &replica.Local{}, RunJob: r.run}
				for i := 0; time.Now().Add(time.Minute).Before(end); i++ {
					time.Sleep(time.Minute)
					if i%97 == 0 {
						s = &Scheduler{Store: st, Claims: &replica.Local{}, RunJob: r.run} // a restart
					}
					if _, err := s.Tick(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
				got := r.get(j.ID)
				if len(got) != tc.runs {
					t.Errorf("%d runs, want %d: %v", len(got), tc.runs, got)
				}
				walls := map[string]bool{}
				for i, at := range got {
					w := at.In(loc).Format("15:04")
					if walls[w] {
						t.Errorf("slot %s ran twice", w)
					}
					walls[w] = true
					if i > 0 && !at.After(got[i-1]) {
						t.Errorf("runs out of order: %v", got)
					}
				}
			})
		})
	}
}

// TestMissedSlotsRunOnce stops the gateway for five hours: the hourly job
// runs once on restart, says how many runs it missed, and then keeps its
// schedule.
func TestMissedSlotsRunOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Date(2026, 6, 1, 8, 59, 0, 0, time.UTC)
		sleepUntil(start)
		st := NewStore(t.TempDir())
		r := &runs{}
		j := addJob(t, st, Spec{Name: "hourly", Message: "m", Cron: "0 * * * *"}, start)
		var log testbuf.Buffer
		s := &Scheduler{Store: st, Claims: &replica.Local{}, RunJob: r.run, Log: slog.New(slog.NewTextHandler(&log, nil))}
		sleepUntil(start.Add(time.Minute)) // 09:00
		s.Tick(context.Background())
		// stopped from 09:01 to 14:30: 10:00 ... 14:00 missed
		sleepUntil(time.Date(2026, 6, 1, 14, 30, 0, 0, time.UTC))
		s = &Scheduler{Store: st, Claims: &replica.Local{}, RunJob: r.run, Log: slog.New(slog.NewTextHandler(&log, nil))}
		s.Tick(context.Background())
		s.Tick(context.Background())
		sleepUntil(time.Date(2026, 6, 1, 15, 0, 0, 0, time.UTC))
		s.Tick(context.Background())
		if got := r.get(j.ID); len(got) != 3 {
			t.Fatalf("runs %v, want 09:00, 14:30, 15:00", got)
		}
		if !strings.Contains(log.String(), `job \"hourly\" (`+j.ID+`) missed 4 run(s) while the gateway was stopped; running it once now`) {
			t.Errorf("log: %s", log.String())
		}
	})
}

// TestClaimSurvivesCrash: a process that dies during a run does not run
// the slot again after a restart, and two schedulers ticking together run
// each slot once.
func TestClaimSurvivesCrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Date(2026, 6, 1, 8, 59, 0, 0, time.UTC)
		sleepUntil(start)
		st := NewStore(t.TempDir())
		j := addJob(t, st, Spec{Name: "every", Message: "m", Every: time.Minute}, start)
		sleepUntil(start.Add(time.Minute))
		crashed := &Scheduler{Store: st, Claims: &replica.Local{}, RunJob: func(ctx context.Context, _ Job) error {
			panic("crash")
		}}
		func() {
			defer func() { recover() }()
			crashed.Tick(context.Background())
		}()
		r := &runs{}
		tickTogether := func() { // four schedulers (processes) at once
			var wg sync.WaitGroup
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s := &Scheduler{Store: st, Claims: &replica.Local{}, RunJob: r.run}
					s.Tick(context.Background())
				}()
			}
			wg.Wait()
		}
		tickTogether()
		if got := r.get(j.ID); len(got) != 0 {
			t.Fatalf("the crashed slot ran again: %v", got)
		}
		sleepUntil(start.Add(2 * time.Minute))
		tickTogether()
		if got := r.get(j.ID); len(got) != 1 {
			t.Fatalf("4 schedulers ran the slot %d times", len(got))
		}
	})
}

// TestAddedWhileRunning: a job written to jobs.json by another process
// (here: another Store on the same file) while the scheduler runs, runs
// without a restart; a one-time job then deletes itself.
func TestAddedWhileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		ran := make(chan Job, 4)
		s := &Scheduler{Store: NewStore(dir), Claims: &replica.Local{}, Poll: 10 * time.Millisecond, RunJob: func(_ context.Context, j Job) error {
			ran <- j
			return nil
		}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		synctest.Wait() // the scheduler holds its lock and waits
		if !NewStore(dir).Running() {
			t.Error("Running() is false while the scheduler runs")
		}
		if err := (&Scheduler{Store: NewStore(dir), Claims: &replica.Local{}}).Run(ctx); err != ErrRunning {
			t.Errorf("a second scheduler: %v, want ErrRunning", err)
		}
		other := NewStore(dir)
		j := addJob(t, other, Spec{Name: "soon", Message: "hello", At: time.Now().Add(50 * time.Millisecond)}, time.Now())
		select {
		case got := <-ran:
			if got.ID != j.ID || got.Payload.Message != "hello" {
				t.Errorf("ran %+v", got)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the job added while the scheduler ran did not run")
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		f, _ := other.Load()
		if len(f.Jobs) != 0 {
			t.Errorf("the one-time job was kept: %+v", f.Jobs)
		}
		if NewStore(dir).Running() {
			t.Error("Running() after the scheduler stopped")
		}
	})
}

// TestNanobotFormat reads a jobs.json as nanobot writes it and writes it
// back with the same keys and values.
func TestNanobotFormat(t *testing.T) {
	in := `{
  "version": 1,
  "jobs": [
    {
      "id": "a1b2c3d4",
      "name": "Morning brief",
      "enabled": true,
      "schedule": {
        "kind": "cron",
        "atMs": null,
        "everyMs": null,
        "expr": "0 9 * * *",
        "tz": "Asia/Shanghai"
      },
      "payload": {
        "kind": "agent_turn",
        "message": "Summarise my day",
        "deliver": true,
        "channel": "telegram",
        "to": "123"
      },
      "state": {
        "nextRunAtMs": 1790000000000,
        "lastRunAtMs": null,
        "lastStatus": null,
        "lastError": null
      },
      "createdAtMs": 1780000000000,
      "updatedAtMs": 1780000000000,
      "deleteAfterRun": false
    }
  ]
}
`
	dir := t.TempDir()
	st := NewStore(dir)
	os.MkdirAll(filepath.Dir(st.Path), 0o700)
	os.WriteFile(st.Path, []byte(in), 0o600)
	if err := st.Edit(context.Background(), func(*File) error { return nil }); err != nil {
		t.Fatal(err)
	}
	out, _ := os.ReadFile(st.Path)
	var a, b any
	json.Unmarshal([]byte(in), &a)
	json.Unmarshal(out, &b)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if !bytes.Equal(ja, jb) {
		t.Errorf("rewritten differently:\n%s\nwant\n%s", out, in)
	}
	os.WriteFile(st.Path, []byte(`{"version":1,"jobs":[{"id":"x","enabled":"yes"}]}`), 0o600)
	if _, err := st.Load(); err == nil || !strings.Contains(err.Error(), "jobs.json: key jobs.enabled: string is not a boolean") {
		t.Errorf("bad type: %v", err)
	}
	os.WriteFile(st.Path, []byte("{\"version\":1,\n\"jobs\":[}"), 0o600)
	if _, err := st.Load(); err == nil || !strings.Contains(err.Error(), "jobs.json:2: ") {
		t.Errorf("bad syntax: %v", err)
	}
}

// TestClaimsAcrossStores: replicas whose jobs.json are copies (one per
// machine) run each slot once when they share claims.
func TestClaimsAcrossStores(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Date(2026, 6, 1, 8, 59, 0, 0, time.UTC)
		sleepUntil(start)
		r := &runs{}
		claims := &replica.Local{}
		a, b := NewStore(t.TempDir()), NewStore(t.TempDir())
		j := addJob(t, a, Spec{Name: "hourly", Message: "m", Cron: "0 * * * *"}, start)
		if err := b.Edit(context.Background(), func(f *File) error { f.Jobs = append(f.Jobs, j); return nil }); err != nil {
			t.Fatal(err)
		}
		sa := &Scheduler{Store: a, RunJob: r.run, Claims: claims}
		sb := &Scheduler{Store: b, RunJob: r.run, Claims: claims}
		for h := range 3 {
			sleepUntil(time.Date(2026, 6, 1, 9+h, 0, 0, 0, time.UTC))
			sa.Tick(context.Background())
			sb.Tick(context.Background())
		}
		if got := r.get(j.ID); len(got) != 3 {
			t.Fatalf("runs %v, want 09:00, 10:00, 11:00 once each", got)
		}
	})
}

// TestIdleWithoutJobs: a scheduler with no job to run neither locks nor
// rewrites jobs.json at each tick (it did once a second: a write and two
// fsyncs); a job added meanwhile is still seen.
func TestIdleWithoutJobs(t *testing.T) {
	dir := t.TempDir()
	st := NewStore(dir)
	s := &Scheduler{Store: st, Claims: &replica.Local{}, RunJob: func(context.Context, Job) error { return nil }}
	ctx := context.Background()
	if _, err := s.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(st.Path)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := s.Tick(ctx); err != nil {
			t.Fatal(err)
		}
	}
	after, err := os.Stat(st.Path)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) || !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("jobs.json rewritten by ticks with no job to run")
	}
	j := addJob(t, NewStore(dir), Spec{Name: "later", Message: "hello", At: time.Now().Add(time.Hour)}, time.Now())
	next, err := s.Tick(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.UnixMilli(*j.State.NextRunAtMs); !next.Equal(want) {
		t.Errorf("next run after a job was added: %v, want %v", next, want)
	}
}
