package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rogpeppe/go-internal/txtar"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/gateway/config"
	"github.com/nbots/nb/gateway/cron"
	"github.com/nbots/nb/gateway/replica"
	gwsession "github.com/nbots/nb/gateway/session"
)

// TestNanobotHomeContinues takes the home of
// testdata/script/gateway_nanobot_home.txtar (nanobot v0.1.4.post5's,
// its jobs file still beside config.json, a session of nanobot ≤ v0.1.3
// still in ~/.nanobot/sessions), starts nb's scheduler on it half an hour
// after nanobot stopped, on a fake clock, and checks that every job fires
// at the instant nanobot had scheduled, then at those croniter gives
// next; and that every session's history is what the model is sent.
func TestNanobotHomeContinues(t *testing.T) {
	ar, err := txtar.ParseFile("testdata/script/gateway_nanobot_home.txtar")
	if err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	for _, f := range ar.Files {
		if !strings.HasPrefix(f.Name, "home/") {
			continue
		}
		p := filepath.Join(home, strings.TrimPrefix(f.Name, "home/"))
		os.MkdirAll(filepath.Dir(p), 0o700)
		if err := os.WriteFile(p, f.Data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := config.Env{"HOME=" + home, "OPENAI_API_KEY=k", "OPENAI_API_ADDRESS=http://127.0.0.1:1"}
	path, err := config.Find("", env)
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path, "", env)
	if err != nil {
		t.Fatal(err)
	}
	if c.Workspace != filepath.Join(home, ".nanobot", "workspace") || c.NanobotCron != filepath.Join(home, ".nanobot", "cron", "jobs.json") || c.NanobotSessions != filepath.Join(home, ".nanobot", "sessions") {
		t.Fatalf("workspace %s, nanobot's cron file %s, sessions %s", c.Workspace, c.NanobotCron, c.NanobotSessions)
	}

	utc := func(d, h, m, s int) time.Time { return time.Date(2026, 6, d, h, m, s, 0, time.UTC) }
	synctest.Test(t, func(t *testing.T) {
		time.Sleep(time.Until(utc(1, 6, 30, 0))) // nanobot stopped at 06:00
		store := cron.NewStore(c.Workspace)
		store.Legacy = c.NanobotCron
		var mu sync.Mutex
		ran := map[string][]time.Time{}
		s := &cron.Scheduler{Store: store, Claims: &replica.Local{}, Poll: time.Hour, RunJob: func(_ context.Context, j cron.Job) error {
			mu.Lock()
			ran[j.Name] = append(ran[j.Name], time.Now().UTC())
			mu.Unlock()
			return nil
		}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- s.Run(ctx) }()
		time.Sleep(time.Until(utc(3, 2, 0, 0)))
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		want := map[string][]time.Time{
			// 09:00 London on weekdays (BST): Monday, Tuesday.
			"Morning brief": {utc(1, 8, 0, 0), utc(2, 8, 0, 0)},
			// 10:30 Tokyo.
			"Tokyo standup": {utc(2, 1, 30, 0), utc(3, 1, 30, 0)},
			// croniter's sixth field is the seconds: 12:00:30 New York (EDT).
			"Market open": {utc(1, 16, 0, 30), utc(2, 16, 0, 30)},
		}
		for name, w := range want {
			got := ran[name]
			if len(got) != len(w) {
				t.Errorf("%s ran at %v, want %v", name, got, w)
				continue
			}
			for i := range w {
				if !got[i].Equal(w[i]) {
					t.Errorf("%s ran at %v, want %v", name, got, w)
					break
				}
			}
		}
		// Every 2 h from nanobot's next run, 07:00: 22 runs to 01:00 on the 3rd.
		if w := ran["Water"]; len(w) != 22 || !w[0].Equal(utc(1, 7, 0, 0)) || !w[1].Equal(utc(1, 9, 0, 0)) || !w[21].Equal(utc(3, 1, 0, 0)) {
			t.Errorf("Water ran at %v, want every 2 h from 07:00", w)
		}
	})

	m, err := gwsession.NewManager(filepath.Join(c.Workspace, "sessions"))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.Legacy = c.NanobotSessions
	for key, want := range map[string][]string{
		"telegram:12345": {"Remind me to water the plants on Sundays", "I will remind you every Sunday.", "What is the weather?", "Sunny, 22°C."},
		"cli:direct":     {"What is the weather today?", "", "Sunny, 22°C", "It is sunny, 22°C."},
	} {
		s, err := m.Get(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ev := range s.History() {
			got = append(got, agent.Text(ev.Message))
		}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s: history %q, want %q", key, got, want)
		}
	}
}
