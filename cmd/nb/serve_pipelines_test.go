package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

// TestServePipelines drives a real nb serve: §2.13's Review example, a
// .dot file of the served folder, its gate answered over HTTP; then a
// run stopped by SIGTERM while its gate waits is continued by
// nb pipeline resume from the run folder the server kept.
func TestServePipelines(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nb serve")
	}
	fake := httptest.NewServer(openaitest.New(providertest.Echo))
	defer fake.Close()
	dir, state := t.TempDir(), t.TempDir()
	files := map[string]string{
		"writer.yml": "meta: {name: Writer, author: Ann}\nprovider: {id: openai, credentials: {address: ENV/OPENAI_API_ADDRESS, access-token: k}, settings: {model: m}}\n",
		"review.dot": "digraph Review {\n  start [shape=Mdiamond]\n  exit [shape=Msquare]\n  review_gate [shape=hexagon, label=\"Review Changes\"]\n  start -> review_gate\n  review_gate -> ship_it [label=\"[A] Approve\"]\n  review_gate -> fixes [label=\"[F] Fix\"]\n  ship_it -> exit\n  fixes -> review_gate\n}\n",
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := []string{"OPENAI_API_ADDRESS=" + fake.URL, "XDG_STATE_HOME=" + state}
	cmd, url, stderr := nbServe(t, dir, env, "--grace", "100ms")

	start := func() string {
		status, body, err := post(url+"/pipelines", `{"file": "review.dot", "cartridge": "writer"}`)
		if err != nil || status != http.StatusCreated {
			t.Fatalf("POST /pipelines: %d %s %v", status, body, err)
		}
		var out struct{ ID string }
		json.Unmarshal([]byte(body), &out) //nolint:errcheck // checked below
		if out.ID == "" {
			t.Fatalf("no id: %s", body)
		}
		return out.ID
	}
	get := func(path string, out any) {
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("GET %s: %v: %s", path, err, data)
		}
	}
	answer := func(id, not, value string) string {
		var q struct{ Questions []struct{ ID string } }
		until(t, "a question", func() bool {
			get("/pipelines/"+id+"/questions", &q)
			return len(q.Questions) == 1 && q.Questions[0].ID != not
		})
		if value != "" {
			if status, body, err := post(url+"/pipelines/"+id+"/questions/"+q.Questions[0].ID+"/answer", `{"value": "`+value+`"}`); err != nil || status != 200 {
				t.Fatalf("answer: %d %s %v", status, body, err)
			}
		}
		return q.Questions[0].ID
	}
	var info struct {
		Status         string
		CompletedNodes []string `json:"completed_nodes"`
	}

	id := start()
	q1 := answer(id, "", "F")
	answer(id, q1, "A")
	until(t, "the run's end", func() bool { get("/pipelines/"+id, &info); return info.Status == "success" })
	if got := strings.Join(info.CompletedNodes, ","); got != "start,review_gate,fixes,review_gate,ship_it,exit" {
		t.Fatalf("path %s", got)
	}

	// SIGTERM while a gate waits: the run stops with its checkpoint.
	id = start()
	answer(id, "", "")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := waitExit(cmd, 20*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	runDir := filepath.Join(state, "nb", "pipeline-runs", id)
	code, out, errOut := runNB(t, append(env, "HOME="+t.TempDir(), "NANO_BOTS_CARTRIDGES_PATH="+dir), "pipeline", "resume", "--auto-approve", runDir)
	if code != 0 || !strings.Contains(out, "pipeline succeeded") {
		t.Fatalf("resume: exit %d\n%s\n%s", code, out, errOut)
	}
}
