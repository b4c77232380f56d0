package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/tracing/otlpjson"
)

// otlpReceiver is an OTLP/HTTP traces endpoint in the test: it decodes
// the JSON requests nb sends to /v1/traces.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []otlpjson.Span
	res   []otlpjson.KeyValue
	bad   []string
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	o.mu.Lock()
	defer o.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/json" || r.Header.Get("X-Test") != "a b" {
		o.bad = append(o.bad, r.Method+" "+r.URL.Path+" "+r.Header.Get("Content-Type")+" X-Test="+r.Header.Get("X-Test"))
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var req otlpjson.Request
	if err := dec.Decode(&req); err != nil {
		o.bad = append(o.bad, "undecodable: "+err.Error())
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	for _, rs := range req.ResourceSpans {
		o.res = rs.Resource.Attributes
		for _, ss := range rs.ScopeSpans {
			o.spans = append(o.spans, ss.Spans...)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, "{}") //nolint:errcheck // test
}

func attr(kvs []otlpjson.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key != key {
			continue
		}
		v := kv.Value
		switch {
		case v.StringValue != nil:
			return *v.StringValue
		case v.IntValue != nil:
			return *v.IntValue
		case v.BoolValue != nil:
			if *v.BoolValue {
				return "true"
			}
			return "false"
		case v.ArrayValue != nil:
			var parts []string
			for _, e := range v.ArrayValue.Values {
				if e.StringValue != nil {
					parts = append(parts, *e.StringValue)
				}
			}
			return "[" + strings.Join(parts, ",") + "]"
		}
	}
	return "<none>"
}

// A traced nb serve: the request's traceparent is continued, the span
// tree is request → agent exchange → provider calls and tool call, with
// the GenAI attributes, the provider is sent the traceparent of its
// call's span, and the JSON log lines name the trace.
func TestServeTracing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nb serve")
	}
	recv := &otlpReceiver{}
	otlp := httptest.NewServer(recv)
	defer otlp.Close()

	var pmu sync.Mutex
	var parents []string
	fake := openaitest.New(openaiBrain)
	provider := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pmu.Lock()
		parents = append(parents, r.Header.Get("Traceparent"))
		pmu.Unlock()
		fake.ServeHTTP(w, r)
	}))
	defer provider.Close()

	dir := t.TempDir()
	cart := `meta: {name: Weather, author: tests, version: 1.0.0}
safety: {tools: {confirmable: false}}
tools:
  - name: get-weather
    description: Gets the weather of a city.
    parameters: {type: object, properties: {city: {type: string}}, required: [city]}
    lua: 'return "sunny in " .. parameters.city'
provider: ` + providerSection["openai"] + "\n"
	if err := os.WriteFile(filepath.Join(dir, "weather.yml"), []byte(cart), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"OPENAI_API_ADDRESS=" + provider.URL, "OPENAI_API_KEY=test-key",
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + otlp.URL, "OTEL_EXPORTER_OTLP_HEADERS=x-test=a%20b", "OTEL_SERVICE_NAME=nb-test"}
	cmd, url, stderr := nbServe(t, dir, env, "--watch", "0", "--log-format", "json")

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	const parentID = "00f067aa0ba902b7"
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(`{"model":"weather","messages":[{"role":"user","content":"call get-weather {\"city\":\"Paris\"}"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", "00-"+traceID+"-"+parentID+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "sunny in Paris") {
		t.Fatalf("answer %d: %s", resp.StatusCode, body)
	}
	// SIGTERM flushes the spans not yet sent.
	cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // checked by the wait
	if err := waitExit(cmd, 20*time.Second); err != nil {
		t.Fatalf("nb serve: %v\n%s", err, stderr)
	}

	recv.mu.Lock()
	defer recv.mu.Unlock()
	if len(recv.bad) > 0 {
		t.Fatalf("bad OTLP requests: %v", recv.bad)
	}
	if got := attr(recv.res, "service.name"); got != "nb-test" {
		t.Errorf("service.name %q", got)
	}
	byName := map[string][]otlpjson.Span{}
	byID := map[string]otlpjson.Span{}
	for _, s := range recv.spans {
		if s.TraceID != traceID {
			t.Errorf("span %s in trace %s, not the request's %s", s.Name, s.TraceID, traceID)
		}
		byName[s.Name] = append(byName[s.Name], s)
		byID[s.SpanID] = s
	}
	one := func(name string) otlpjson.Span {
		t.Helper()
		if len(byName[name]) == 0 {
			var names []string
			for n := range byName {
				names = append(names, n)
			}
			t.Fatalf("no span %q among %v", name, names)
		}
		return byName[name][0]
	}
	root := one("POST /v1/chat/completions")
	if root.ParentSpanID != parentID || root.Kind != 2 || attr(root.Attributes, "http.response.status_code") != "200" || attr(root.Attributes, "http.route") != "/v1/chat/completions" {
		t.Errorf("request span: %+v", root)
	}
	agent := one("invoke_agent Weather")
	if agent.ParentSpanID != root.SpanID || attr(agent.Attributes, "gen_ai.operation.name") != "invoke_agent" {
		t.Errorf("agent span: %+v", agent)
	}
	chats := byName["chat gpt-4o-mini"]
	if len(chats) != 2 {
		t.Fatalf("%d chat spans, want 2 (the tool call, the answer)", len(chats))
	}
	for _, c := range chats {
		if c.ParentSpanID != agent.SpanID || c.Kind != 3 {
			t.Errorf("chat span not a client child of the exchange: %+v", c)
		}
		for k, want := range map[string]string{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o-mini"} {
			if got := attr(c.Attributes, k); got != want {
				t.Errorf("chat span %s = %q, want %q", k, got, want)
			}
		}
		for _, k := range []string{"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.response.finish_reasons"} {
			if attr(c.Attributes, k) == "<none>" {
				t.Errorf("chat span has no %s: %+v", k, c.Attributes)
			}
		}
		if attr(c.Attributes, "gen_ai.input.messages") != "<none>" {
			t.Error("message contents recorded without NB_TRACE_CONTENT=1")
		}
	}
	if a, b := attr(chats[0].Attributes, "gen_ai.response.finish_reasons")+attr(chats[1].Attributes, "gen_ai.response.finish_reasons"), "[tool_calls][stop]"; a != b && a != "[stop][tool_calls]" {
		t.Errorf("finish reasons %s, want %s", a, b)
	}
	tool := one("execute_tool get-weather")
	if tool.ParentSpanID != agent.SpanID || attr(tool.Attributes, "gen_ai.tool.name") != "get-weather" || attr(tool.Attributes, "gen_ai.tool.call.id") != "call_1" || tool.Status != nil {
		t.Errorf("tool span: %+v", tool)
	}

	// The provider was sent each call's own span as the parent.
	pmu.Lock()
	defer pmu.Unlock()
	if len(parents) != 2 {
		t.Fatalf("provider requests %d", len(parents))
	}
	for _, tp := range parents {
		parts := strings.Split(tp, "-")
		if len(parts) != 4 || parts[1] != traceID {
			t.Fatalf("provider got traceparent %q", tp)
		}
		if s, ok := byID[parts[2]]; !ok || s.Name != "chat gpt-4o-mini" {
			t.Errorf("provider's traceparent %q names span %+v, not a chat span", tp, s)
		}
	}

	// Every stderr line is JSON; the request's line names the trace.
	found := false
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("stderr line not JSON: %q", line)
			continue
		}
		if m["msg"] == "request" {
			found = true
			if m["trace_id"] != traceID || m["span_id"] != root.SpanID || m["request"] == "" {
				t.Errorf("request log line: %v", m)
			}
		}
	}
	if !found {
		t.Errorf("no request line in:\n%s", stderr)
	}
	if !strings.Contains(stderr.String(), `"msg":"nb: serving 1 cartridge of`) {
		t.Errorf("no JSON banner in:\n%s", stderr)
	}
}

// Every server started with --log-format json writes only JSON objects on
// standard error, one a line, its start-up banner included.
func TestServersLogJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("starts servers")
	}
	bin := nbBinary(t)
	dir := t.TempDir()
	model := httptest.NewServer(openaitest.New(openaiBrain))
	defer model.Close()
	cfg := filepath.Join(dir, "gateway.json")
	os.WriteFile(cfg, []byte(`{"agents": {"defaults": {"model": "m", "provider": "custom", "workspace": "`+filepath.Join(dir, "ws")+`"}},
  "providers": {"custom": {"apiBase": "`+model.URL+`", "apiKey": "k"}}, "gateway": {"heartbeat": {"enabled": false}}}`), 0o600)
	pages := filepath.Join(dir, "pages")
	os.MkdirAll(pages, 0o755)
	os.WriteFile(filepath.Join(pages, "p.yml"), []byte("description: d\nfunctions:\n  hello:\n    description: d\n    parameters: {}\n    cmdline: [echo, hello]\n"), 0o644)
	cart := filepath.Join(dir, "echo.yml")
	os.WriteFile(cart, []byte("meta: {name: Echo, author: tests, version: 1.0.0}\nprovider: "+providerSection["openai"]+"\n"), 0o644)

	for _, c := range []struct {
		name   string
		args   []string
		probe  string // path asked once the server is up
		banner string // in the banner's msg
	}{
		{"gateway", []string{"gateway", "--config", cfg, "--listen", "ADDR", "--log-format", "json"}, "/health", ""},
		{"robopages", []string{"robopages", "serve", "-P", pages, "--listen", "ADDR", "--lazy", "--log-format", "json"}, "/", "serving 1 functions of 1 pages"},
		{"mcp", []string{"mcp", "serve", "--listen", "ADDR", "--log-format", "json", cart}, "/mcp", "nb: serving MCP on http://"},
	} {
		t.Run(c.name, func(t *testing.T) {
			addr := freeAddr(t)
			args := slices.Clone(c.args)
			args[slices.Index(args, "ADDR")] = addr
			cmd := exec.Command(bin, args...)
			home := filepath.Join(dir, c.name)
			cmd.Env = []string{"HOME=" + home, "XDG_STATE_HOME=" + filepath.Join(home, "state"), "PATH=" + os.Getenv("PATH"), "NB_DOTENV=0",
				"OPENAI_API_ADDRESS=" + model.URL, "OPENAI_API_KEY=k"}
			stderr := startServer(t, cmd, "http://"+addr+c.probe)
			cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // checked by the wait
			if err := waitExit(cmd, 20*time.Second); err != nil {
				t.Fatalf("%v\n%s", err, stderr.String())
			}
			out := strings.TrimSpace(stderr.String())
			if out == "" {
				t.Fatal("nothing on stderr")
			}
			sawBanner := c.banner == ""
			for _, line := range strings.Split(out, "\n") {
				var m map[string]any
				if err := json.Unmarshal([]byte(line), &m); err != nil {
					t.Errorf("not a JSON object: %q", line)
					continue
				}
				if m["time"] == nil || m["level"] == nil || m["msg"] == nil {
					t.Errorf("line without time, level, msg: %q", line)
				}
				if s, _ := m["msg"].(string); c.banner != "" && strings.Contains(s, c.banner) {
					sawBanner = true
				}
			}
			if !sawBanner {
				t.Errorf("no banner %q in:\n%s", c.banner, out)
			}
		})
	}
}
