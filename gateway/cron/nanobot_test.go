package cron

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbots/nb/gateway/replica"
	"github.com/nbots/nb/internal/testbuf"
)

// nanobotJobs is a jobs.json as nanobot v0.1.4.post5's CronService
// writes it (json.dumps(indent=2, ensure_ascii=False)).
const nanobotJobs = `{
  "version": 1,
  "jobs": [
    {
      "id": "3f2a9c1e",
      "name": "Morning brief",
      "enabled": true,
      "schedule": {
        "kind": "cron",
        "atMs": null,
        "everyMs": null,
        "expr": "0 9 * * 1-5",
        "tz": "Europe/London"
      },
      "payload": {
        "kind": "agent_turn",
        "message": "Résumé des nouvelles",
        "deliver": true,
        "channel": "telegram",
        "to": "123456789"
      },
      "state": {
        "nextRunAtMs": 1780387200000,
        "lastRunAtMs": null,
        "lastStatus": null,
        "lastError": null
      },
      "createdAtMs": 1780300000000,
      "updatedAtMs": 1780300000000,
      "deleteAfterRun": false
    }
  ]
}`

// TestLegacyJobsMoved: nanobot up to v0.1.4.post5 keeps its jobs beside
// its configuration; the first read moves them into the workspace (as
// nanobot from v0.1.4.post6 on does), saying so once; a workspace file
// that exists is never replaced.
func TestLegacyJobsMoved(t *testing.T) {
	home := t.TempDir()
	legacy := filepath.Join(home, "cron", "jobs.json")
	os.MkdirAll(filepath.Dir(legacy), 0o700)
	if err := os.WriteFile(legacy, []byte(nanobotJobs), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(home, "workspace")
	var said []string
	st := NewStore(ws)
	st.Legacy, st.Log = legacy, func(m string) { said = append(said, m) }
	f, err := st.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Jobs) != 1 || f.Jobs[0].ID != "3f2a9c1e" || *f.Jobs[0].State.NextRunAtMs != 1780387200000 {
		t.Fatalf("jobs read: %+v", f.Jobs)
	}
	if data, err := os.ReadFile(st.Path); err != nil || string(data) != nanobotJobs {
		t.Fatalf("workspace file: %q, %v; want nanobot's file, byte for byte", data, err)
	}
	if _, err := os.Stat(legacy); !os.IsNotExist(err) {
		t.Errorf("the legacy file is still there: %v", err)
	}
	if _, err := st.Load(); err != nil {
		t.Fatal(err)
	}
	if len(said) != 1 || !strings.Contains(said[0], "moved nanobot's jobs file "+legacy+" to "+st.Path) {
		t.Errorf("said %q, want one line naming both files", said)
	}

	// A workspace file exists (nanobot ≥ v0.1.4.post6 already moved one,
	// or nb wrote one): the legacy file is left alone, as nanobot leaves it.
	os.WriteFile(legacy, []byte(nanobotJobs), 0o600)
	if err := st.Edit(context.Background(), func(f *File) error { f.Jobs = nil; return nil }); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(legacy); string(data) != nanobotJobs {
		t.Error("the legacy file changed though the workspace had its own")
	}
	if len(said) != 1 {
		t.Errorf("said %q", said)
	}
}

// TestEditNeverHidesLegacy: the first write (the scheduler's start, a
// cron add) moves the legacy jobs in rather than creating an empty file
// over them.
func TestEditNeverHidesLegacy(t *testing.T) {
	home := t.TempDir()
	legacy := filepath.Join(home, "cron", "jobs.json")
	os.MkdirAll(filepath.Dir(legacy), 0o700)
	os.WriteFile(legacy, []byte(nanobotJobs), 0o600)
	st := NewStore(filepath.Join(home, "workspace"))
	st.Legacy = legacy
	j, err := NewJob(Spec{Name: "n", Message: "m", Every: time.Hour}, time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Add(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	f, err := st.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Jobs) != 2 || f.Jobs[0].ID != "3f2a9c1e" {
		t.Fatalf("jobs: %+v, want nanobot's job then the new one", f.Jobs)
	}
}

// TestStartSkipsMissedRuns: a gateway started after its jobs' slots
// passed skips them as nanobot does (the next run counted from now; a
// one-time job not run and disabled), except a job with catchUp, which
// runs once; a slot still to come is kept.
func TestStartSkipsMissedRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)
		sleepUntil(start)
		st := NewStore(t.TempDir())
		hourly := addJob(t, st, Spec{Name: "hourly", Message: "m", Cron: "0 * * * *"}, start)
		catchUp := addJob(t, st, Spec{Name: "catch up", Message: "m", Cron: "0 * * * *", CatchUp: true}, start)
		once := addJob(t, st, Spec{Name: "once", Message: "m", At: start.Add(90 * time.Minute)}, start)
		later := addJob(t, st, Spec{Name: "later", Message: "m", At: start.Add(10 * time.Hour)}, start)
		every := addJob(t, st, Spec{Name: "every", Message: "m", Every: 5 * time.Hour}, start) // due 13:00
		restart := addJob(t, st, Spec{Name: "restart", Message: "m", At: time.Date(2026, 6, 1, 12, 29, 30, 0, time.UTC)}, start)
		// stopped from 08:00 to 12:30
		sleepUntil(time.Date(2026, 6, 1, 12, 30, 0, 0, time.UTC))
		r := &runs{}
		var log testbuf.Buffer
		s := &Scheduler{Store: st, Claims: &replica.Local{}, RunJob: r.run, Log: slog.New(slog.NewTextHandler(&log, nil))}
		if err := s.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		s.Tick(context.Background())
		if got := r.get(hourly.ID); len(got) != 0 {
			t.Errorf("hourly ran at start: %v", got)
		}
		if got := r.get(once.ID); len(got) != 0 {
			t.Errorf("the missed one-time job ran: %v", got)
		}
		if got := r.get(restart.ID); len(got) != 1 {
			t.Errorf("the job due 30 s before the start ran %d times, want once", len(got))
		}
		if got := r.get(catchUp.ID); len(got) != 1 {
			t.Errorf("the catchUp job ran %d times at start, want once", len(got))
		}
		f, _ := st.Load()
		byID := map[string]Job{}
		for _, j := range f.Jobs {
			byID[j.ID] = j
		}
		if j := byID[hourly.ID]; *j.State.NextRunAtMs != time.Date(2026, 6, 1, 13, 0, 0, 0, time.UTC).UnixMilli() {
			t.Errorf("hourly next at %v, want 13:00", time.UnixMilli(*j.State.NextRunAtMs).UTC())
		}
		if j := byID[once.ID]; j.Enabled || j.State.NextRunAtMs != nil {
			t.Errorf("missed one-time job: enabled %v, next %v; want disabled, none", j.Enabled, j.State.NextRunAtMs)
		}
		if j := byID[later.ID]; !j.Enabled || *j.State.NextRunAtMs != start.Add(10*time.Hour).UnixMilli() {
			t.Errorf("a one-time job still to come changed: %+v", j)
		}
		if j := byID[every.ID]; *j.State.NextRunAtMs != start.Add(5*time.Hour).UnixMilli() {
			t.Errorf("an every job still to come moved to %v", time.UnixMilli(*j.State.NextRunAtMs).UTC())
		}
		if !strings.Contains(log.String(), `job \"hourly\" (`+hourly.ID+`) missed its run of 2026-06-01T09:00:00Z while the gateway was stopped: skipped`) {
			t.Errorf("log: %s", log.String())
		}
		sleepUntil(time.Date(2026, 6, 1, 13, 0, 0, 0, time.UTC))
		s.Tick(context.Background())
		if got := r.get(hourly.ID); len(got) != 1 {
			t.Errorf("hourly ran %d times at 13:00, want once", len(got))
		}
		if got := r.get(every.ID); len(got) != 1 {
			t.Errorf("every ran %d times at 13:00, want once", len(got))
		}
	})
}

// TestSixFieldsSecondsLast: croniter, nanobot's, reads a sixth field as
// the seconds (and a seventh as the year); gronx wants them first.
func TestSixFieldsSecondsLast(t *testing.T) {
	after := time.Date(2026, 6, 1, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		expr string
		want time.Time
	}{
		{"0 9 * * * 30", time.Date(2026, 6, 1, 9, 0, 30, 0, time.UTC)},
		{"*/5 * * * * 15", time.Date(2026, 6, 1, 8, 0, 15, 0, time.UTC)},
		{"0 9 1 1 * 0 2027", time.Date(2027, 1, 1, 9, 0, 0, 0, time.UTC)},
		{"30 9 * * 1-5", time.Date(2026, 6, 1, 9, 30, 0, 0, time.UTC)},
	} {
		s := Schedule{Kind: KindCron, Expr: &tc.expr}
		if err := s.Validate(); err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		got, ok := s.Next(after, time.UTC)
		if !ok || !got.Equal(tc.want) {
			t.Errorf("%s: next %v, want %v", tc.expr, got, tc.want)
		}
	}
}

// TestBrokenJobReported: a job whose zone nanobot wrote but this machine
// does not know (or whose expression is not valid) never runs: the
// scheduler says so at start, once.
func TestBrokenJobReported(t *testing.T) {
	dir := t.TempDir()
	st := NewStore(dir)
	data := strings.Replace(nanobotJobs, `"tz": "Europe/London"`, `"tz": "Mars/Olympus_Mons"`, 1)
	os.MkdirAll(filepath.Dir(st.Path), 0o700)
	os.WriteFile(st.Path, []byte(data), 0o600)
	var log testbuf.Buffer
	s := &Scheduler{Store: st, Claims: &replica.Local{}, RunJob: (&runs{}).run, Log: slog.New(slog.NewTextHandler(&log, nil))}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.Tick(context.Background())
	s.Tick(context.Background())
	want := `cron: job \"Morning brief\" (3f2a9c1e) never runs: unknown time zone \"Mars/Olympus_Mons\"`
	if n := strings.Count(log.String(), want); n != 1 {
		t.Errorf("said %d times, want once: %s", n, log.String())
	}
}
