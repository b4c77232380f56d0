package main

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nbots/nb/internal/metric/metrictest"
)

func getStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// --metrics-listen moves /metrics to its own listener; /control stays.
func TestServeMetricsListen(t *testing.T) {
	dir := t.TempDir()
	maddr := freeAddr(t)
	_, url, _ := nbServe(t, dir, nil, "--metrics-listen", maddr)
	if got := getStatus(t, url+"/metrics"); got != http.StatusNotFound {
		t.Errorf("/metrics on the main listener: %d", got)
	}
	if got := getStatus(t, url+"/control"); got != http.StatusOK {
		t.Errorf("/control: %d", got)
	}
	s := metrictest.Get(t, "http://"+maddr+"/metrics")
	if s.Values[`nb_build_info{server="serve"}`] != 1 {
		t.Errorf("no nb_build_info{server=serve}:\n%s", s.Text)
	}
}

// nb mcp serve --listen answers GET /metrics beside /mcp and counts the
// requests to /mcp.
func TestMCPServeMetrics(t *testing.T) {
	dir := t.TempDir()
	cart := "meta: {name: M, author: Tests, version: 1.0.0}\nprovider: {id: openai, credentials: {address: ENV/OPENAI_API_ADDRESS, access-token: ENV/OPENAI_API_KEY}, settings: {model: m}}\n"
	if err := os.WriteFile(filepath.Join(dir, "m.yml"), []byte(cart), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	cmd := exec.Command(nbBinary(t), "mcp", "serve", "--listen", addr, filepath.Join(dir, "m.yml"))
	cmd.Env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH"), "OPENAI_API_ADDRESS=http://127.0.0.1:1", "OPENAI_API_KEY=sk-x"}
	url := "http://" + addr
	startServer(t, cmd, url+"/metrics")
	before := metrictest.Get(t, url+"/metrics")
	for range 2 {
		resp, err := http.Post(url+"/mcp", "application/json", strings.NewReader(`not json`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	after := metrictest.Get(t, url+"/metrics")
	if got := after.Sum(`nb_http_requests_total{server="mcp",route="/mcp",method="POST"`) - before.Sum(`nb_http_requests_total{server="mcp",route="/mcp",method="POST"`); got != 2 {
		t.Errorf("POST /mcp counted %v times, want 2:\n%s", got, after.Text)
	}
	if after.Values[`nb_build_info{server="mcp"}`] != 1 {
		t.Error("no nb_build_info{server=mcp}")
	}
	req, _ := http.NewRequest("GET", url+"/metrics", nil)
	req.Header.Set("Origin", "http://evil.example")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a web page's scrape: %d", resp.StatusCode)
	}
}
