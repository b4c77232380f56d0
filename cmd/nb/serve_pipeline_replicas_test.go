package main

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

// Two nb serve replicas share one PostgreSQL: a pipeline run started on
// a is read on b while it runs; a is killed (kill -9) in the middle of
// node c; b takes the run over from its checkpoint and finishes it, no
// finished node runs again, and the events followed from b hold the
// whole run, each stage completed once.
func TestServePipelineReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nb serve")
	}
	store, _ := startPostgres(t)
	var mu sync.Mutex
	asked := map[string]int{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fake := &http.Server{Handler: openaitest.New(func(turn providertest.Turn) providertest.Reply {
		mu.Lock()
		for _, n := range []string{"STEP_A", "STEP_B", "STEP_C", "STEP_D"} {
			if strings.Contains(turn.LastUser(), n) {
				asked[n]++
			}
		}
		mu.Unlock()
		return providertest.Reply{Chunks: []string{"done", "."}, Delay: 400 * time.Millisecond}
	})}
	go fake.Serve(ln) //nolint:errcheck // ends with Close
	t.Cleanup(func() { fake.Close() })
	dir := t.TempDir()
	files := map[string]string{
		"worker.yml": "meta: {name: Worker}\nprovider: " + providerSection["openai"] + "\n",
		"chain.dot": `digraph Chain {
  start [shape=Mdiamond]
  exit [shape=Msquare]
  a [prompt="STEP_A"]
  b [prompt="STEP_B"]
  c [prompt="STEP_C"]
  d [prompt="STEP_D"]
  start -> a -> b -> c -> d -> exit
}
`,
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"OPENAI_API_ADDRESS=http://" + ln.Addr().String(), "OPENAI_API_KEY=k", "NB_SERVE_TOKEN=" + token}
	cmdA, a, _ := nbServe(t, dir, append(env, "XDG_STATE_HOME="+t.TempDir()), "--watch", "0", "--store", store, "--replica-id", "r1", "--replica-timeout", "2s")
	cmdB, b, stderrB := nbServe(t, dir, append(env, "XDG_STATE_HOME="+t.TempDir()), "--watch", "0", "--store", store, "--replica-id", "r2", "--replica-timeout", "2s")

	resp, body := request(t, "POST", a+"/pipelines", `{"file": "chain.dot", "cartridge": "worker"}`)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /pipelines on a: %d %s", resp.StatusCode, body)
	}
	id := between(body, `"id":"`, `"`)
	var info struct {
		Status         string
		CurrentNode    string   `json:"current_node"`
		CompletedNodes []string `json:"completed_nodes"`
	}
	// Its state, read on b while a runs it, until node c runs.
	until(t, "b sees node b completed", func() bool {
		resp, body := request(t, "GET", b+"/pipelines/"+id, "")
		if resp.StatusCode != 200 {
			t.Fatalf("GET on b: %d %s", resp.StatusCode, body)
		}
		json.Unmarshal([]byte(body), &info) //nolint:errcheck // checked next
		return slices.Contains(info.CompletedNodes, "b")
	})
	if info.Status != "running" {
		t.Errorf("on b while a runs it: %+v", info)
	}
	if resp, body := request(t, "POST", b+"/pipelines/"+id+"/cancel", ""); resp.StatusCode != http.StatusConflict || !strings.Contains(body, "another replica") {
		t.Errorf("cancel on b: %d %s", resp.StatusCode, body)
	}
	if err := cmdA.Process.Kill(); err != nil {
		t.Fatal(err)
	}

	// The events, followed on b from the first, to the end.
	req, _ := http.NewRequest("GET", b+"/pipelines/"+id+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	ev, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Body.Close()
	done := make(chan struct{})
	var kinds []string
	completed := map[string]int{}
	go func() {
		defer close(done)
		sc := bufio.NewScanner(ev.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			var e struct{ Event, Name string }
			json.Unmarshal([]byte(data), &e) //nolint:errcheck // compared below
			kinds = append(kinds, e.Event)
			if e.Event == "StageCompleted" {
				completed[e.Name]++
			}
		}
	}()
	// b's log, read once it has exited (its writer is a goroutine of exec).
	logB := func() string { cmdB.Process.Kill(); cmdB.Wait(); return stderrB.String() } //nolint:errcheck // killed
	select {
	case <-done:
	case <-time.After(40 * time.Second):
		t.Fatalf("the events did not end: %v\n%s", kinds, logB())
	}
	resp, body = request(t, "GET", b+"/pipelines/"+id, "")
	json.Unmarshal([]byte(body), &info) //nolint:errcheck // checked next
	if info.Status != "success" || strings.Join(info.CompletedNodes, ",") != "start,a,b,c,d,exit" {
		t.Fatalf("after the takeover: %s\n%s", body, logB())
	}
	if n := strings.Count(strings.Join(kinds, " "), "PipelineStarted"); n != 2 || kinds[len(kinds)-1] != "PipelineCompleted" {
		t.Errorf("events: %v", kinds)
	}
	for _, n := range []string{"start", "a", "b", "c", "d"} {
		if completed[n] != 1 {
			t.Errorf("stage %s completed %d times in the events: %v", n, completed[n], completed)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if asked["STEP_A"] != 1 || asked["STEP_B"] != 1 || asked["STEP_C"] > 2 || asked["STEP_D"] != 1 {
		t.Errorf("the model was asked %v: a finished node ran again", asked)
	}
	if log := logB(); !strings.Contains(log, "pipeline run taken over from a replica that stopped") {
		t.Errorf("b's log does not say it took the run over:\n%s", log)
	}
}
