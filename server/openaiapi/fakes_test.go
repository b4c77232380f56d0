package openaiapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/provider"
	_ "github.com/nbots/nb/provider/anthropic"
	"github.com/nbots/nb/provider/anthropic/anthropictest"
	_ "github.com/nbots/nb/provider/cohere"
	"github.com/nbots/nb/provider/cohere/coheretest"
	_ "github.com/nbots/nb/provider/google"
	"github.com/nbots/nb/provider/google/googletest"
	_ "github.com/nbots/nb/provider/maritaca"
	"github.com/nbots/nb/provider/maritaca/maritacatest"
	_ "github.com/nbots/nb/provider/mistral"
	"github.com/nbots/nb/provider/mistral/mistraltest"
	_ "github.com/nbots/nb/provider/ollama"
	"github.com/nbots/nb/provider/ollama/ollamatest"
	_ "github.com/nbots/nb/provider/openai"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

// providerSections are the provider sections of a cartridge on each of
// the seven providers, talking to the in-process fakes.
var providerSections = map[string]string{
	"openai": `provider:
  id: openai
  credentials:
    address: ENV/OPENAI_API_ADDRESS
    access-token: ENV/OPENAI_API_KEY
  settings:
    model: gpt-4o-mini
`,
	"ollama": `provider:
  id: ollama
  credentials:
    address: ENV/OLLAMA_API_ADDRESS
  settings:
    model: llama3.2
`,
	"anthropic": `provider:
  id: anthropic
  credentials:
    address: ENV/ANTHROPIC_API_ADDRESS
    api-key: ENV/ANTHROPIC_API_KEY
  settings:
    model: claude-sonnet-4-5
    max_tokens: 1024
`,
	"cohere": `provider:
  id: cohere
  credentials:
    address: ENV/COHERE_API_ADDRESS
    api-key: ENV/COHERE_API_KEY
  settings:
    model: command-a-03-2025
`,
	"google": `provider:
  id: google
  credentials:
    service: generative-language-api
    address: ENV/GOOGLE_API_ADDRESS
    api-key: ENV/GOOGLE_API_KEY
  options:
    model: gemini-2.5-flash
`,
	"maritaca": `provider:
  id: maritaca
  credentials:
    address: ENV/MARITACA_API_ADDRESS
    api-key: ENV/MARITACA_API_KEY
  settings:
    model: sabia-3
`,
	"mistral": `provider:
  id: mistral
  credentials:
    address: ENV/MISTRAL_API_ADDRESS
    api-key: ENV/MISTRAL_API_KEY
  settings:
    model: mistral-small-latest
`,
}

// providerIDs are the seven providers, sorted.
func providerIDs() []string {
	var ids []string
	for id := range providerSections {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// weatherTool is a cartridge tool that runs on the server.
const weatherTool = `safety:
  tools:
    confirmable: false
tools:
  - name: get-weather
    description: Gets the weather of a city.
    parameters:
      type: object
      properties:
        city: {type: string}
      required: [city]
    lua: |
      return "sunny in " .. parameters.city
`

// fakes are the seven in-process provider fakes, sharing one brain and
// one recorder.
type fakes struct {
	env      []string
	recorder *providertest.Recorder
}

func startFakes(t testing.TB, brain providertest.Brain) *fakes {
	t.Helper()
	f := &fakes{recorder: &providertest.Recorder{}}
	start := func(variable string, h http.Handler) {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		f.env = append(f.env, variable+"="+srv.URL)
	}
	oa := openaitest.New(brain)
	oa.Recorder = f.recorder
	start("OPENAI_API_ADDRESS", oa)
	ol := ollamatest.New(brain)
	ol.Recorder = f.recorder
	start("OLLAMA_API_ADDRESS", ol)
	an := anthropictest.New(brain)
	an.Recorder = f.recorder
	start("ANTHROPIC_API_ADDRESS", an)
	co := coheretest.New(brain)
	co.Recorder = f.recorder
	start("COHERE_API_ADDRESS", co)
	go_ := googletest.New(brain)
	go_.Recorder = f.recorder
	start("GOOGLE_API_ADDRESS", go_)
	ma := maritacatest.New(brain)
	ma.Recorder = f.recorder
	start("MARITACA_API_ADDRESS", ma)
	mi := mistraltest.New(brain)
	mi.Recorder = f.recorder
	start("MISTRAL_API_ADDRESS", mi)
	for _, k := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "COHERE_API_KEY", "GOOGLE_API_KEY", "MARITACA_API_KEY", "MISTRAL_API_KEY"} {
		f.env = append(f.env, k+"=test-key")
	}
	return f
}

// catalog is a Catalog of bots built from cartridge sources.
type catalog struct {
	mu     sync.Mutex
	models []Model
	bots   map[string]*bot.Bot
}

type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string   { return e.msg }
func (e *statusError) StatusCode() int { return e.status }

func (c *catalog) Models(context.Context) []Model {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Model(nil), c.models...)
}

func (c *catalog) Bot(_ context.Context, id string) (*bot.Bot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.bots[id]; ok {
		return b, nil
	}
	if id == "forbidden" {
		return nil, &statusError{http.StatusForbidden, "this token may not use the cartridge forbidden"}
	}
	return nil, &statusError{http.StatusNotFound, "The model '" + id + "' does not exist or you do not have access to it."}
}

// newCatalog builds a bot for each cartridge source (id -> YAML).
func newCatalog(t testing.TB, f *fakes, sources map[string]string) *catalog {
	t.Helper()
	c := &catalog{bots: map[string]*bot.Bot{}}
	host := bot.Host{Environ: f.env, Retry: &provider.RetryPolicy{}}
	for id, src := range sources {
		cart, err := cartridge.Parse([]byte(src), id+".yml", cartridge.FormatYAML, host.LookupEnv)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		b, err := bot.New(context.Background(), cart, host)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		t.Cleanup(func() { b.Close() })
		c.bots[id] = b
		c.models = append(c.models, Model{ID: id, Cartridge: cart})
	}
	sort.Slice(c.models, func(i, j int) bool { return c.models[i].ID < c.models[j].ID })
	return c
}

// cartridgeOn is a cartridge on provider p with extra YAML.
func cartridgeOn(p, extra string) string {
	return "meta:\n  name: Test\n  author: tests\n  version: 1.0.0\nbehaviors:\n  interaction:\n    directive: You are a test.\n" + extra + providerSections[p]
}

// testServer is the API over a catalog, served by httptest.
type testServer struct {
	*httptest.Server
	h     *Handler
	fakes *fakes
}

func newTestServer(t testing.TB, brain providertest.Brain, sources map[string]string, o Options) *testServer {
	t.Helper()
	f := startFakes(t, brain)
	h := New(newCatalog(t, f, sources), o)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &testServer{Server: srv, h: h, fakes: f}
}

// post sends body to path and returns the response and its body.
func (s *testServer) post(t testing.TB, path, body string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Post(s.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// sseEvent is one server-sent event as a client reads it.
type sseEvent struct {
	Event, Data string
}

// readSSE splits a streamed body into its events.
func readSSE(t testing.TB, body string) []sseEvent {
	t.Helper()
	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Data != "" || cur.Event != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.Event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.Data = strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("unexpected SSE line %q in\n%s", line, body)
		}
	}
	if cur.Data != "" {
		t.Fatalf("the stream ends without a blank line after %q", cur.Data)
	}
	return out
}

// decodeJSON decodes s into a generic value, failing the test when it is
// not JSON.
func decodeJSON(t testing.TB, s string) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	return m
}

// path reads a value in decoded JSON: path elements are keys and indexes.
func path(v any, elems ...any) any {
	for _, e := range elems {
		switch k := e.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// normJSON is s decoded and encoded again: keys sorted, as mustJSON
// writes decoded values.
func normJSON(t testing.TB, s string) string {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%v: %s", err, s)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var _ = fmt.Sprint
