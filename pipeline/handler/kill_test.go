package handler

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nbots/nb/pipeline/engine"
)

// killFlow is S9's chain: tool nodes that each append a line to their
// count file, and simulated LLM nodes (one at full fidelity).
func killFlow(dir string) string {
	var b strings.Builder
	b.WriteString("digraph K {\n  start [shape=Mdiamond]\n  exit [shape=Msquare]\n")
	prev := "start"
	for i := 1; i <= 6; i++ {
		id := fmt.Sprintf("step%d", i)
		fmt.Fprintf(&b, "  %s [shape=parallelogram, tool_command=\"printf x >> %s/%s.count; sleep 0.0%d\"]\n", id, dir, id, i)
		fmt.Fprintf(&b, "  %s -> %s\n", prev, id)
		prev = id
		if i == 3 {
			fmt.Fprintf(&b, "  think [prompt=\"think\", fidelity=full]\n  %s -> think\n", prev)
			prev = "think"
		}
	}
	fmt.Fprintf(&b, "  %s -> exit\n}\n", prev)
	return b.String()
}

// TestKillChild is the process S9's test kills: it runs (or resumes)
// the flow in $NB_KILL_DIR. It does nothing in a normal test run.
func TestKillChild(t *testing.T) {
	dir := os.Getenv("NB_KILL_DIR")
	if dir == "" {
		t.Skip("the child of TestS9KillAndResume")
	}
	src := killFlow(dir)
	g := load(t, src)
	cfg := engine.Config{Graph: g, Source: []byte(src), File: filepath.Join(dir, "flow.dot"), LogsRoot: filepath.Join(dir, "run"),
		Handlers: NewRegistry(Options{Dir: dir, Environ: os.Environ()})}
	run := engine.Run
	if _, err := os.Stat(filepath.Join(cfg.LogsRoot, engine.CheckpointFile)); err == nil {
		run = engine.Resume
	}
	res, err := run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Status != engine.Success {
		t.Fatalf("%s: %s", res.Status, res.FailureReason)
	}
}

// S9: kill -9 at random points, then resume: the checkpoint always
// parses, no node the checkpoint listed as completed ever runs again,
// and every run ends with each node once in completed_nodes. Runs are
// killed and resumed until it ends, in fresh folders, until the test has
// made NB_KILLS kills (20 by default).
func TestS9KillAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	kills := 20
	if s := os.Getenv("NB_KILLS"); s != "" {
		fmt.Sscan(s, &kills)
	}
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 9))
	childIn := func(dir string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "NB_KILL_DIR="+dir)
		return cmd
	}
	// A whole run's time, start-up included, is the span kills fall in.
	began := time.Now()
	if out, err := childIn(t.TempDir()).CombinedOutput(); err != nil {
		t.Fatalf("a whole run: %v\n%s", err, out)
	}
	span := time.Since(began)
	made, runs, seen := 0, 0, 0
	for made < kills {
		runs++
		dir := t.TempDir()
		count := func(id string) int {
			data, _ := os.ReadFile(filepath.Join(dir, id+".count"))
			return len(data)
		}
		frozen := map[string]int{} // a completed node's count when first seen completed
		check := func() {
			cp, err := engine.LoadCheckpoint(filepath.Join(dir, "run"))
			if errors.Is(err, engine.ErrNoCheckpoint) {
				return
			}
			if err != nil {
				t.Fatalf("the checkpoint after a kill: %v", err)
			}
			for _, id := range cp.CompletedNodes {
				if _, ok := frozen[id]; !ok && strings.HasPrefix(id, "step") {
					frozen[id] = count(id)
				}
			}
		}
		for finished := false; !finished; {
			cmd := childIn(dir)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("child: %v", err)
				}
				finished = true
			case <-time.After(time.Duration(rnd.Int64N(int64(span)))):
				cmd.Process.Signal(syscall.SIGKILL)
				<-done
				made++
				// A tool command of the killed run may outlive it (kill -9
				// gives nb no chance to end its children): let it finish
				// before the counts are read.
				time.Sleep(100 * time.Millisecond)
			}
			check()
		}
		cp, err := engine.LoadCheckpoint(filepath.Join(dir, "run"))
		if err != nil {
			t.Fatal(err)
		}
		want := "start,step1,step2,step3,think,step4,step5,step6,exit"
		if got := strings.Join(cp.CompletedNodes, ","); got != want {
			t.Errorf("completed_nodes %s, want %s", got, want)
		}
		for id, n := range frozen {
			if c := count(id); c != n {
				t.Errorf("%s ran again after the checkpoint listed it as completed (%d runs, %d then)", id, c, n)
			}
		}
		for i := 1; i <= 6; i++ {
			if count(fmt.Sprintf("step%d", i)) < 1 {
				t.Errorf("step%d never ran", i)
			}
		}
		seen += len(frozen)
	}
	t.Logf("%d kills over %d runs; %d completed nodes checked", made, runs, seen)
}
