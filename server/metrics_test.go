package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nbots/nb/admission"
	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/internal/metric/metrictest"
	_ "github.com/nbots/nb/provider/openai"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/server"
	"github.com/nbots/nb/server/nanobots"
	"github.com/nbots/nb/server/openaiapi"
)

// metricsServer is nb serve's core with its OpenAI front-end on one
// cartridge, echo, whose provider is the OpenAI fake.
func metricsServer(t *testing.T, configure func(*server.Options)) (*server.Server, string, string) {
	t.Helper()
	return fakeServer(t, providertest.Echo, []string{"echo"}, configure)
}

// fakeServer is nb serve's core, with /metrics and its OpenAI and Nano
// Bots front-ends, on the cartridges named, whose provider is the
// OpenAI fake answering reply. It returns the server and the addresses
// of its HTTP front and of the fake.
func fakeServer(t *testing.T, reply func(providertest.Turn) providertest.Reply, cartridges []string, configure func(*server.Options)) (*server.Server, string, string) {
	t.Helper()
	fake := httptest.NewServer(openaitest.New(reply))
	t.Cleanup(fake.Close)
	dir := t.TempDir()
	for _, name := range cartridges {
		src := "meta: {name: " + name + ", author: Tests, version: 1.0.0}\n" +
			"provider: {id: openai, credentials: {address: ENV/OPENAI_API_ADDRESS, access-token: ENV/OPENAI_API_KEY}, settings: {model: metrics-model}}\n"
		if err := os.WriteFile(filepath.Join(dir, name+".yml"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	opts := server.Options{Dirs: []string{dir}, WatchInterval: -1, Metrics: true, ClientCartridges: true, ClientHosts: []string{"127.0.0.1"},
		Host: bot.Host{Environ: []string{"OPENAI_API_ADDRESS=" + fake.URL, "OPENAI_API_KEY=sk-test", "HOME=" + t.TempDir()}}}
	if configure != nil {
		configure(&opts)
	}
	srv, err := server.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	openaiapi.New(srv, openaiapi.Options{Admit: srv.Admit, EndUser: srv.EndUser, Confirmer: srv.Confirmer()}).Register(srv)
	api := nanobots.New(srv, nanobots.Options{})
	t.Cleanup(api.Close)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return srv, hs.URL, fake.URL
}

func post(t *testing.T, url, body string, header ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The counters move by exactly what was sent: three completions, one for
// a cartridge that does not exist, one request to no route; the tokens
// are the sum of what the answers reported.
func TestServeMetricsCountTraffic(t *testing.T) {
	_, url, _ := metricsServer(t, nil)
	before := metrictest.Get(t, url+"/metrics")
	in, out := 0, 0
	for range 3 {
		code, body := post(t, url+"/v1/chat/completions", `{"model":"echo","messages":[{"role":"user","content":"hi"}]}`)
		if code != 200 {
			t.Fatalf("%d %s", code, body)
		}
		var ans struct {
			Usage struct{ PromptTokens, CompletionTokens int } `json:"usage"`
		}
		if err := json.Unmarshal([]byte(body), &ans); err != nil {
			t.Fatal(err)
		}
		var raw map[string]map[string]int
		json.Unmarshal([]byte(body), &raw) //nolint:errcheck // read above
		in += raw["usage"]["prompt_tokens"]
		out += raw["usage"]["completion_tokens"]
	}
	if code, _ := post(t, url+"/v1/chat/completions", `{"model":"nope","messages":[{"role":"user","content":"hi"}]}`); code != 404 {
		t.Fatalf("unknown model: %d", code)
	}
	if code, _ := post(t, url+"/no/such/route", `{}`); code != 404 {
		t.Fatalf("no route: %d", code)
	}
	after := metrictest.Get(t, url+"/metrics")
	for series, want := range map[string]float64{
		`nb_http_requests_total{server="serve",route="POST /v1/chat/completions",method="POST",status="2xx"}`:    3,
		`nb_http_requests_total{server="serve",route="POST /v1/chat/completions",method="POST",status="4xx"}`:    1,
		`nb_http_requests_total{server="serve",route="unmatched",method="POST",status="4xx"}`:                    1,
		`nb_http_request_duration_seconds_count{server="serve",route="POST /v1/chat/completions",method="POST"}`: 4,
		`nb_provider_calls_total{provider="openai",model="metrics-model",cartridge="echo",outcome="ok"}`:         3,
		`nb_provider_call_duration_seconds_count{provider="openai",model="metrics-model"}`:                       3,
		`nb_tokens_total{provider="openai",model="metrics-model",cartridge="echo",kind="input"}`:                 float64(in),
		`nb_tokens_total{provider="openai",model="metrics-model",cartridge="echo",kind="output"}`:                float64(out),
	} {
		if got := metrictest.Delta(before, after, series); got != want {
			t.Errorf("%s moved by %v, want %v", series, got, want)
		}
	}
	if in == 0 || out == 0 {
		t.Errorf("the fake reported no usage: %d in, %d out", in, out)
	}
	// The exposition's metadata and buckets.
	for fam, typ := range map[string]string{"nb_http_requests_total": "counter", "nb_http_request_duration_seconds": "histogram", "nb_runs_in_flight": "gauge", "go_goroutines": "gauge"} {
		if after.Types[fam] != typ {
			t.Errorf("# TYPE %s = %q, want %s", fam, after.Types[fam], typ)
		}
		if after.Help[fam] == "" {
			t.Errorf("# HELP %s has no text", fam)
		}
	}
	if _, ok := after.Values[`nb_http_request_duration_seconds_bucket{server="serve",route="POST /v1/chat/completions",method="POST",le="+Inf"}`]; !ok {
		t.Errorf("no +Inf bucket:\n%s", after.Text)
	}
	if _, ok := after.Values[`nb_runs_in_flight{state="running"}`]; !ok {
		t.Error("no nb_runs_in_flight")
	}
}

// No label value comes from what a client wrote: a path, a model, a
// client's cartridge and its model, a method.
func TestServeMetricsLabelsAreBounded(t *testing.T) {
	_, url, fake := metricsServer(t, nil)
	weird := "zz-user-text"
	post(t, url+"/"+weird+"/x?"+weird+"=1", `{}`)
	post(t, url+"/v1/chat/completions", `{"model":"`+weird+`","messages":[{"role":"user","content":"hi"}]}`)
	// A client's cartridge, its name and model the client's text.
	cart := `{"meta": {"name": "` + weird + `", "author": "` + weird + `", "version": "1.0.0"}, "provider": {"id": "openai", "credentials": {"address": "` + fake + `", "access-token": "sk-x"}, "settings": {"model": "` + weird + `"}}}`
	if code, body := post(t, url+"/cartridges", `{"cartridge":`+cart+`,"input":"hi"}`); code != 200 {
		t.Fatalf("client cartridge: %d %s", code, body)
	}
	req, _ := http.NewRequest(weird, url+"/v1/models", nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	s := metrictest.Get(t, url+"/metrics")
	for series := range s.Values {
		if strings.Contains(series, weird) {
			t.Errorf("a label holds the client's text: %s", series)
		}
	}
	if s.Sum(`nb_http_requests_total{server="serve",route="unmatched"`) == 0 {
		t.Error("the request to no route is not counted as route=unmatched")
	}
	if s.Sum(`method="other"`) == 0 {
		t.Error("an unknown method is not counted as other")
	}
}

// /metrics is behind the server's tokens, as its other routes.
func TestServeMetricsNeedTheToken(t *testing.T) {
	tok, err := server.NewToken("", "0123456789abcdef0123")
	if err != nil {
		t.Fatal(err)
	}
	_, url, _ := metricsServer(t, func(o *server.Options) { o.Tokens = []*server.Token{tok} })
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: %d", resp.StatusCode)
	}
	metrictest.Get(t, url+"/metrics", "Authorization", "Bearer 0123456789abcdef0123")
}

// nb_runs_in_flight counts a run once: waiting while it waits on its
// client, running otherwise (admission's Active includes the waiting).
func TestRunsInFlightCountEachRunOnce(t *testing.T) {
	srv, url, _ := metricsServer(t, nil)
	run, err := srv.Admission().Admit(&admission.Tenant{}, admission.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Done()
	check := func(running, waiting float64) {
		t.Helper()
		s := metrictest.Get(t, url+"/metrics")
		if r, w := s.Values[`nb_runs_in_flight{state="running"}`], s.Values[`nb_runs_in_flight{state="waiting"}`]; r != running || w != waiting {
			t.Errorf("running %v and waiting %v, want %v and %v", r, w, running, waiting)
		}
	}
	check(1, 0)
	resume := run.Wait(context.Background())
	check(0, 1)
	resume()
	check(1, 0)
}
