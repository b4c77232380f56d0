package pageserver

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/nbots/nb/internal/metric/metrictest"
	"github.com/nbots/nb/robopage"
)

func metricsServer(t *testing.T, token string) string {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "echo.yml"), []byte("description: e\nfunctions:\n  say:\n    description: d\n    parameters: {p: {type: string, description: d}}\n    cmdline: [echo, '${p}']\n"), 0o644)
	lib, err := robopage.Load(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(&Server{Library: lib, Executor: &robopage.Executor{Environ: os.Environ()}, Token: token, Log: quietLog(), Metrics: true})
	t.Cleanup(srv.Close)
	return srv.URL
}

// The robopages API's counters move by exactly the scripted calls.
func TestRobopagesMetricsCountTraffic(t *testing.T) {
	url := metricsServer(t, "")
	before := metrictest.Get(t, url+"/metrics")
	do(t, "GET", url+"/", "", "")
	do(t, "GET", url+"/some/filter", "", "")
	if code, body := do(t, "POST", url+"/process", "application/json", `[{"type":"function","function":{"name":"say","arguments":{"p":"hi"}}}]`); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	do(t, "DELETE", url+"/process", "", "")
	after := metrictest.Get(t, url+"/metrics")
	for series, want := range map[string]float64{
		`nb_http_requests_total{server="robopages",route="GET /{filter...}",method="GET",status="2xx"}`: 2,
		`nb_http_requests_total{server="robopages",route="POST /process",method="POST",status="2xx"}`:   1,
		`nb_http_requests_total{server="robopages",route="/",method="DELETE",status="4xx"}`:             1,
	} {
		if got := metrictest.Delta(before, after, series); got != want {
			t.Errorf("%s moved by %v, want %v", series, got, want)
		}
	}
}

// GET /metrics takes the API's token.
func TestRobopagesMetricsNeedTheToken(t *testing.T) {
	url := metricsServer(t, "s3cret")
	if code, _ := do(t, "GET", url+"/metrics", "", ""); code != 401 {
		t.Errorf("without the token: %d", code)
	}
	metrictest.Get(t, url+"/metrics", "Authorization", "Bearer s3cret")
}
