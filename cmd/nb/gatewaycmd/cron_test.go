package gatewaycmd

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/cron"
	"github.com/nbots/nb/gateway/replica"
)

// cronCLI runs nb gateway cron with args in workspace and returns the exit
// code, stdout and stderr.
func cronCLI(t *testing.T, workspace string, args ...string) (int, string, string) {
	t.Helper()
	dir := t.TempDir()
	out, _ := os.Create(filepath.Join(dir, "out"))
	errf, _ := os.Create(filepath.Join(dir, "err"))
	defer out.Close()
	defer errf.Close()
	a := &cli{stdout: out, stderr: errf}
	ny, _ := time.LoadLocation("America/New_York")
	code := a.report(context.Background(), a.gatewayCron(context.Background(), workspace, "", ny, 0, args))
	o, _ := os.ReadFile(out.Name())
	e, _ := os.ReadFile(errf.Name())
	return code, string(o), string(e)
}

func TestGatewayCronCLI(t *testing.T) {
	ws := t.TempDir()
	expect := func(wantCode int, wantOut string, args ...string) string {
		t.Helper()
		code, out, errs := cronCLI(t, ws, args...)
		if code != wantCode || !regexp.MustCompile(wantOut).MatchString(out+errs) {
			t.Fatalf("nb gateway cron %s: exit %d, %q%q; want exit %d matching %q", strings.Join(args, " "), code, out, errs, wantCode, wantOut)
		}
		return out
	}
	expect(0, `^No scheduled jobs.\n$`, "list")
	expect(2, `^nb: --tz can only be used with --cron \(see nb help\)\n$`, "add", "-n", "x", "-m", "hi", "--every", "60", "--tz", "UTC")
	expect(2, `give one of --every, --cron or --at`, "add", "-n", "x", "-m", "hi")
	expect(1, `^nb: unknown time zone "Mars/Base"\n$`, "add", "-n", "x", "-m", "hi", "--cron", "0 9 * * *", "--tz", "Mars/Base")
	out := expect(0, `^✓ Added job 'Morning' \([0-9a-f]{8}\)\n$`, "add", "--name", "Morning", "--message", "Brief me", "--cron", "0 9 * * 1-5", "--tz", "Europe/London", "--deliver", "--to", "123", "--channel", "telegram")
	id := out[len(out)-10 : len(out)-2]
	expect(0, `✓ Added job 'Soon'`, "add", "-n", "Soon", "-m", "ping", "--at", "2099-01-01T09:00")
	expect(0, `✓ Added job 'Often'`, "add", "-n", "Often", "-m", "tick", "-e", "90")
	expect(0, `(?s)^ID +Name +Schedule +Status +Next Run\n`+id+` +Morning +0 9 \* \* 1-5 \(Europe/London\) +enabled +\d{4}-\d\d-\d\d 09:00 (GMT|BST)\n.* +Soon +one-time +enabled +2099-01-01 09:00 EST\n.* +Often +every 90s +enabled`, "list")
	f, err := cron.NewStore(ws).Load()
	if err != nil {
		t.Fatal(err)
	}
	j := f.Jobs[0]
	if *j.Schedule.TZ != "Europe/London" || !j.Payload.Deliver || *j.Payload.To != "123" || *j.Payload.Channel != "telegram" || j.Payload.Kind != "agent_turn" || j.State.NextRunAtMs == nil {
		t.Errorf("stored job: %+v", j)
	}
	expect(0, `^✓ Job 'Morning' disabled\n$`, "enable", id, "--disable")
	if out := expect(0, `Soon`, "list"); strings.Contains(out, "Morning") {
		t.Errorf("a disabled job is listed without -a: %s", out)
	}
	expect(0, `Morning .* disabled`, "list", "-a")
	expect(1, `^nb: job `+id+` is disabled: --force runs it anyway\n$`, "run", id)
	expect(0, `^✓ Job 'Morning' queued: the gateway is not running; it runs when the gateway starts\n$`, "run", id, "--force")
	expect(0, `^✓ Job 'Morning' enabled\n$`, "enable", id)
	expect(0, `^✓ Removed job `+id+`\n$`, "remove", id)
	expect(1, `^nb: job `+id+` not found\n$`, "remove", id)
	expect(2, `^nb: gateway cron list: unknown flag --bogus \(see nb gateway cron list --help\)\n$`, "list", "--bogus")
	expect(2, `unknown flag --force`, "list", "--force")
}

// TestGatewayCronWhileRunning: a job added by the CLI while a scheduler
// runs on the workspace fires without a restart, and `run` is handed to it.
func TestGatewayCronWhileRunning(t *testing.T) {
	ws := t.TempDir()
	ran := make(chan string, 8)
	s := &cron.Scheduler{Store: cron.NewStore(ws), Claims: &replica.Local{}, Poll: 20 * time.Millisecond, RunJob: func(_ context.Context, j cron.Job) error {
		ran <- j.Name
		return nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	defer func() { cancel(); <-stopped }()     // before the folder is removed
	go func() { s.Run(ctx); close(stopped) }() //nolint:errcheck // ends with ctx
	for !cron.NewStore(ws).Running() {
		time.Sleep(5 * time.Millisecond)
	}
	at := time.Now().Add(300 * time.Millisecond).Format(time.RFC3339Nano)
	if code, out, errs := cronCLI(t, ws, "add", "-n", "Soon", "-m", "ping", "--at", at); code != 0 {
		t.Fatalf("add: %s%s", out, errs)
	}
	code, out, _ := cronCLI(t, ws, "add", "-n", "Hourly", "-m", "tick", "-e", "3600")
	if code != 0 {
		t.Fatal(out)
	}
	id := out[len(out)-10 : len(out)-2]
	if _, out, _ := cronCLI(t, ws, "run", id); !strings.Contains(out, "handed to the running gateway") {
		t.Errorf("run: %q", out)
	}
	got := map[string]bool{}
	timeout := time.After(10 * time.Second)
	for len(got) < 2 {
		select {
		case n := <-ran:
			got[n] = true
		case <-timeout:
			t.Fatalf("ran %v, want Soon and Hourly", got)
		}
	}
}

// TestGatewayCronAddRefusedPastTheCap: with the workspace's maximum of
// jobs (gateway.limits.cronJobs, 1,000 by default) nb gateway cron add
// refuses, saying what to do, and saves nothing.
func TestGatewayCronAddRefusedPastTheCap(t *testing.T) {
	ws := t.TempDir()
	st := cron.NewStore(ws)
	if err := st.Edit(context.Background(), func(f *cron.File) error {
		for i := range cron.DefaultMaxJobs {
			j, err := cron.NewJob(cron.Spec{Name: "n", Message: "m", Every: time.Hour}, time.Now(), nil)
			if err != nil {
				return err
			}
			j.ID = strings.Repeat("0", 4) + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
			f.Jobs = append(f.Jobs, j)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	code, out, errs := cronCLI(t, ws, "add", "--name", "one more", "--message", "hi", "--every", "60")
	if code == 0 || !strings.Contains(out+errs, "there are already 1000 cron jobs, the most this workspace may have (gateway.limits.cronJobs): remove some first") {
		t.Fatalf("exit %d: %q %q", code, out, errs)
	}
	f, _ := st.Load()
	if len(f.Jobs) != cron.DefaultMaxJobs {
		t.Fatalf("%d jobs", len(f.Jobs))
	}
}

// TestGatewayCronListBroken: a job nanobot wrote with a zone this machine
// does not know never runs; cron list says so, with the reason.
func TestGatewayCronListBroken(t *testing.T) {
	ws := t.TempDir()
	os.MkdirAll(filepath.Join(ws, "cron"), 0o700)
	os.WriteFile(filepath.Join(ws, "cron", "jobs.json"), []byte(`{"version": 1, "jobs": [{"id": "3f2a9c1e", "name": "Morning", "enabled": true,
  "schedule": {"kind": "cron", "atMs": null, "everyMs": null, "expr": "0 9 * * *", "tz": "Mars/Olympus_Mons"},
  "payload": {"kind": "agent_turn", "message": "m", "deliver": false, "channel": null, "to": null},
  "state": {"nextRunAtMs": null, "lastRunAtMs": null, "lastStatus": null, "lastError": null},
  "createdAtMs": 1, "updatedAtMs": 1, "deleteAfterRun": false}]}`), 0o600)
	code, out, errs := cronCLI(t, ws, "list")
	if code != 0 || !regexp.MustCompile(`3f2a9c1e +Morning +0 9 \* \* \* \(Mars/Olympus_Mons\) +broken +never: unknown time zone "Mars/Olympus_Mons"`).MatchString(out) ||
		!strings.Contains(errs, `nb: job 3f2a9c1e (Morning) never runs: unknown time zone "Mars/Olympus_Mons"`) {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
}
