package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/agentproto"
	"github.com/nbots/nb/internal/control"
	"github.com/nbots/nb/internal/npmtest"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

// nb serve's control page shows its own panels from real traffic: the
// cartridges with a load error, a response stored by POST /v1/responses,
// the agent runs with their state (one finished, one running), a failed
// run's error; and, in chromium (when installed), the page draws them.
// NB_SCREENSHOT=path keeps a picture.
func TestServeControlPanels(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nb serve")
	}
	release := make(chan struct{}) // the slow run's answer waits for the test's end
	fake := httptest.NewServer(openaitest.New(func(turn providertest.Turn) providertest.Reply {
		switch turn.LastUser() {
		case "fail":
			return providertest.Reply{Status: 400, ErrorBody: `{"error":{"message":"about 'fail': private words","type":"invalid_request_error","code":"bad_words"}}`}
		case "slow":
			<-release
		}
		return providertest.Echo(turn)
	}))
	defer fake.Close()
	defer close(release)
	dir := t.TempDir()
	for name, src := range map[string]string{
		"writer.yml": "meta: {name: Writer, description: Writes.}\nprovider: {id: openai, credentials: {address: ENV/OPENAI_API_ADDRESS, access-token: k}, settings: {model: control-model}}\n",
		"broken.yml": "meta: {name: Broken}\nprovider: {id: openai, settings: {model: [not, a, name]}}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const token = "a-secret-of-more-than-16-characters"
	_, url, _ := nbServe(t, dir, []string{"OPENAI_API_ADDRESS=" + fake.URL, "NB_SERVE_TOKEN=" + token})
	do := func(method, path, body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}

	// The scripted traffic: a stored response, a failed run, a finished
	// agent run and one that runs on.
	code, body := do("POST", "/v1/responses", `{"model":"writer","input":"hi"}`)
	var stored struct {
		ID    string `json:"id"`
		Usage struct {
			Input  int `json:"input_tokens"`
			Output int `json:"output_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(body, &stored); code != 200 || err != nil || stored.ID == "" {
		t.Fatalf("POST /v1/responses: %d %s", code, body)
	}
	tokens := stored.Usage.Input + stored.Usage.Output
	if code, body := do("POST", "/v1/chat/completions", `{"model":"writer","messages":[{"role":"user","content":"fail"}]}`); code != 502 {
		t.Fatalf("a failing run: %d %s", code, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ac, _ := agentproto.NewClient(url, token)
	conn, err := ac.Start(ctx, "Writer", &agentproto.Frame{Input: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	var finished *agentproto.Frame
	for finished == nil {
		f, err := conn.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if f.Terminal() {
			finished = f
		}
	}
	conn.Abort()
	if finished.Type != agentproto.TypeFinalResult || finished.Usage == nil {
		t.Fatalf("the agent run: %+v", finished)
	}
	tokens += finished.Usage.InputTokens + finished.Usage.OutputTokens
	slow, err := ac.Start(ctx, "Writer", &agentproto.Frame{Input: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Abort()
	running, err := slow.Read(ctx)
	if err != nil || running.Type != agentproto.TypeRunStarted {
		t.Fatalf("the running agent run: %+v %v", running, err)
	}

	// A /v1 run in flight too: it is named after its cartridge once its
	// body is read (the running agent run after its agent's cartridge).
	go func() {
		req, _ := http.NewRequest("POST", url+"/v1/chat/completions", strings.NewReader(`{"model":"writer","messages":[{"role":"user","content":"slow"}]}`))
		req.Header.Set("Authorization", "Bearer "+token)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		_, body := do("GET", "/control/api/state", "")
		if strings.Count(string(body), `"what":"writer"`) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the /v1 run and the agent run are not in flight under their cartridge's name: %s", body)
		}
	}

	// The state the page polls.
	code, body = do("GET", "/control/api/state", "")
	var st control.State
	if err := json.Unmarshal(body, &st); code != 200 || err != nil {
		t.Fatalf("state: %d %v %s", code, err, body)
	}
	tables := map[string]control.Table{}
	for _, tb := range st.Tables {
		tables[tb.ID] = tb
	}
	cells := func(id string) string {
		b, _ := json.Marshal(tables[id].Rows)
		return string(b)
	}
	if got := cells("cartridges"); !strings.Contains(got, `"writer","openai control-model"`) || !strings.Contains(got, `"failed to load: broken.yml:2: provider.credentials.access-token is needed`) || tables["cartridges"].Note != "3 cartridges, 1 failed to load" {
		t.Errorf("cartridges %s (%s)", got, tables["cartridges"].Note)
	}
	if r := tables["responses"].Rows; len(r) != 1 || r[0][0] != stored.ID || r[0][1] != "writer" || r[0][2] != "completed" || r[0][4] != float64(stored.Usage.Input+stored.Usage.Output) {
		t.Errorf("stored responses %v", r)
	}
	if r := tables["agent-runs"].Rows; len(r) != 2 || r[0][0] != running.RunID || r[0][2] != "running" || r[1][0] != finished.RunID || r[1][1] != "Writer" || r[1][2] != "finished" {
		t.Errorf("agent runs %v", r)
	}
	if len(st.InFlight) != 2 {
		t.Errorf("in flight: %+v", st.InFlight)
	}
	const runError = "HTTP 502: provider openai: HTTP 400 bad_words"
	found := false
	for _, e := range st.Errors {
		found = found || e.Where == "run writer" && e.Message == runError
	}
	if !found {
		t.Errorf("the failed run's error is not among %+v", st.Errors)
	}
	if strings.Contains(string(body), "private words") && !strings.Contains(string(body), `"where":"provider openai"`) {
		t.Errorf("the provider's message shows outside the provider's own error: %s", body)
	}

	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("SKIPPING the browser: chromium is not installed: run scripts/install-debian-packages")
	}
	npmtest.Dir(t, "control")
	want, _ := json.Marshal([][2]string{{"responses", stored.ID}, {"responses", "completed"}, {"agent-runs", finished.RunID},
		{"agent-runs", "finished"}, {"agent-runs", running.RunID}, {"agent-runs", "running"}, {"cartridges", "failed to load"}})
	env := []string{"NB_URL=" + url, "CHROMIUM=" + chromium, "NB_TOKEN=" + token, "NB_REQUESTS_MIN=4", "NB_MODEL=control-model",
		"NB_TOKENS=" + fmt.Sprint(tokens), "NB_RUN=writer", "NB_ERROR=" + runError, "NB_CELLS=" + string(want)}
	if shot := os.Getenv("NB_SCREENSHOT"); shot != "" {
		abs := shot
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(npmtest.Root(t), shot)
		}
		env = append(env, "NB_SHOT="+abs)
	}
	out, err := npmtest.Node(ctx, t, "control", "control.mjs", env...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("%v\n%s", err, out)
	}
}
