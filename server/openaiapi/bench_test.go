package openaiapi

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/server"
	"github.com/nbots/nb/tracing"
)

// BenchmarkChatWhole is one non-streamed chat completion through the
// handler, in process, against the OpenAI fake over loopback HTTP: the
// hot path of nb serve's OpenAI API.
func BenchmarkChatWhole(b *testing.B) {
	reply := providertest.Reply{Chunks: []string{"xxxxxx"}}
	fake := openaitest.New(func(providertest.Turn) providertest.Reply { return reply })
	fake.Recorder = nil
	fake.SplitBytes = 1 << 20
	srv := httptest.NewServer(fake)
	defer srv.Close()
	f := &fakes{env: []string{"OPENAI_API_ADDRESS=" + srv.URL, "OPENAI_API_KEY=k"}}
	h := New(newCatalog(b, f, map[string]string{"bench": cartridgeOn("openai", "")}), Options{})
	body := `{"model":"bench","messages":[{"role":"user","content":"hi"}]}`
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body)))
		if rec.Code != 200 {
			b.Fatal(rec.Body.String())
		}
	}
}

// instant answers every provider request at once, in process, as the
// OpenAI API streams: what remains of a request's time is nb's.
type instant struct{}

const instantStream = `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"xxxxxx"},"finish_reason":null}]}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}}

data: [DONE]

`

// instantWhole is the same answer when the request asks for no stream.
const instantWhole = `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"xxxxxx"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}}`

func (instant) RoundTrip(r *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(r.Body) // in memory
	r.Body.Close()
	if !strings.Contains(string(body), `"stream":true`) {
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(instantWhole)), Request: r}, nil
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(strings.NewReader(instantStream)), Request: r}, nil
}

// BenchmarkHandlerOnly is one non-streamed chat completion through the
// handler, its provider answering at once in process: nb's own work per
// request (decoding, the exchange, the provider's request and stream,
// the answer), without the network.
func BenchmarkHandlerOnly(b *testing.B) {
	host := bot.Host{Environ: []string{"OPENAI_API_ADDRESS=http://instant", "OPENAI_API_KEY=k"}, HTTPClient: &http.Client{Transport: instant{}}}
	cart, err := cartridge.Parse([]byte(cartridgeOn("openai", "")), "bench.yml", cartridge.FormatYAML, host.LookupEnv)
	if err != nil {
		b.Fatal(err)
	}
	bt, err := bot.New(context.Background(), cart, host)
	if err != nil {
		b.Fatal(err)
	}
	h := New(&catalog{bots: map[string]*bot.Bot{"bench": bt}, models: []Model{{ID: "bench", Cartridge: cart}}}, Options{})
	body := `{"model":"bench","messages":[{"role":"user","content":"hi"}]}`
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body)))
		if rec.Code != 200 {
			b.Fatal(rec.Body.String())
		}
	}
}

// benchServer is nb serve's stack in process, wired as cmd/nb wires it:
// the server core (request id, CORS, browser guard, body read, request
// log, metrics, admission) and the OpenAI API, over a folder with one
// cartridge whose provider answers at once (instant). Its log is nb
// serve's default (text at info, through the tracing handler) to
// io.Discard.
func benchServer(b testing.TB) http.Handler {
	b.Helper()
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bench.yml"), []byte(cartridgeOn("openai", "")), 0o644); err != nil {
		b.Fatal(err)
	}
	log := slog.New(tracing.LogHandler(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})))
	srv, err := server.New(context.Background(), server.Options{
		Dirs:          []string{dir},
		Host:          bot.Host{Environ: []string{"OPENAI_API_ADDRESS=http://instant", "OPENAI_API_KEY=k", "HOME=" + b.TempDir()}, HTTPClient: &http.Client{Transport: instant{}}},
		WatchInterval: -1,
		Log:           log,
		Metrics:       true,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	New(srv, Options{Logger: log, RequestLogger: srv.Logger, Confirmer: srv.Confirmer(), Admit: srv.Admit,
		EndUser: srv.EndUser, Owner: func(r *http.Request) string { return server.Owner(r.Context()) }}).Register(srv)
	return srv.Handler()
}

// benchServe runs one request of body through h per iteration (see
// requester).
func benchServe(b *testing.B, h http.Handler, body, want string) {
	serve := requester(b, h, body, want)
	b.ReportAllocs()
	for b.Loop() {
		serve()
	}
}

// requester returns a function that sends one request of body through h,
// as a client on loopback sends it (RemoteAddr, Host), and checks the
// answer. The request and the writer are the cheapest there are, and
// reused, so that what is counted is nb's.
func requester(tb testing.TB, h http.Handler, body, want string) func() {
	w := &benchWriter{}
	rd := strings.NewReader(body)
	return func() {
		rd.Reset(body)
		req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:3048/v1/chat/completions", io.NopCloser(rd))
		if err != nil {
			tb.Fatal(err)
		}
		req.RemoteAddr = "127.0.0.1:40000"
		req.Header.Set("Content-Type", "application/json")
		w.reset()
		h.ServeHTTP(w, req)
		if w.status != 200 || !bytes.Contains(w.body, []byte(want)) {
			tb.Fatal(w.status, string(w.body))
		}
	}
}

// benchWriter is a ResponseWriter that keeps the answer in a buffer it
// reuses, and flushes (as a connection's writer does, for streams).
type benchWriter struct {
	header http.Header
	status int
	body   []byte
}

func (w *benchWriter) reset() {
	clear(w.header)
	if w.header == nil {
		w.header = http.Header{}
	}
	w.status, w.body = 0, w.body[:0]
}

func (w *benchWriter) Header() http.Header { return w.header }

func (w *benchWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}

func (w *benchWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.body = append(w.body, b...)
	return len(b), nil
}

func (w *benchWriter) Flush() {}

// SetReadDeadline and SetWriteDeadline succeed, as a connection's do.
func (w *benchWriter) SetReadDeadline(time.Time) error  { return nil }
func (w *benchWriter) SetWriteDeadline(time.Time) error { return nil }

// BenchmarkServeWhole is one non-streamed chat completion through nb
// serve's whole handler (middleware included), its provider answering
// at once in process: nb's own CPU and allocations per request.
func BenchmarkServeWhole(b *testing.B) {
	benchServe(b, benchServer(b), `{"model":"bench","messages":[{"role":"user","content":"hi"}]}`, `"content":"xxxxxx"`)
}

// BenchmarkServeStream is BenchmarkServeWhole for a streamed chat
// completion (stream: true, with the usage chunk).
func BenchmarkServeStream(b *testing.B) {
	benchServe(b, benchServer(b), `{"model":"bench","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, "data: [DONE]")
}

// flushWriter records what each flush sends.
type flushWriter struct {
	benchWriter
	pending []byte
	flushes []string
}

func (w *flushWriter) Write(b []byte) (int, error) {
	w.pending = append(w.pending, b...)
	return w.benchWriter.Write(b)
}

func (w *flushWriter) Flush() {
	w.flushes = append(w.flushes, string(w.pending))
	w.pending = w.pending[:0]
}

// The events that open a streamed answer (the role chunk; Responses'
// created, in_progress, output item and content part) are not sent
// alone: the first token goes out in the same write, so a client waits
// for one write, not five.
func TestFirstTokenInFirstWrite(t *testing.T) {
	h := benchServer(t)
	for _, c := range []struct{ path, body, first string }{
		{"/v1/chat/completions", `{"model":"bench","stream":true,"messages":[{"role":"user","content":"hi"}]}`, `"role":"assistant"`},
		{"/v1/responses", `{"model":"bench","stream":true,"input":"hi"}`, "event: response.created"},
	} {
		w := &flushWriter{}
		w.reset()
		req, err := http.NewRequest(http.MethodPost, "http://127.0.0.1:3048"+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		req.RemoteAddr = "127.0.0.1:40000"
		h.ServeHTTP(w, req)
		if w.status != 200 || len(w.flushes) == 0 {
			t.Fatalf("%s: status %d, %d flushes: %s", c.path, w.status, len(w.flushes), w.body)
		}
		if first := w.flushes[0]; !strings.Contains(first, c.first) || !strings.Contains(first, "xxxxxx") {
			t.Errorf("%s: the first write does not hold both the opening and the first token:\n%s", c.path, first)
		}
	}
}

// BenchmarkServeWholeTraced is BenchmarkServeWhole with tracing on at
// every request (the spans of the request, the exchange and the provider
// call, exported in batches to a collector on loopback that discards
// them): what tracing costs a request.
func BenchmarkServeWholeTraced(b *testing.B) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) //nolint:errcheck // discarded
		w.WriteHeader(http.StatusOK)
	}))
	defer sink.Close()
	stop := tracing.Enable(tracing.Config{Endpoint: sink.URL, ServiceName: "nb"}, "bench")
	defer stop(context.Background()) //nolint:errcheck // discarded
	benchServe(b, benchServer(b), `{"model":"bench","messages":[{"role":"user","content":"hi"}]}`, `"content":"xxxxxx"`)
}

// TestServeAllocs bounds the allocations of one request through nb
// serve's whole stack (BenchmarkServeWhole's and BenchmarkServeStream's
// request): they were 197 and 243 before the provider's answers and the
// request were decoded with segmentio's json, the event stamps formatted
// once a second, the constant headers shared and a request's run given
// one context instead of two (170 and 195 after).
func TestServeAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	h := benchServer(t)
	for _, c := range []struct {
		name, body, want string
		max              float64
	}{
		{"whole", `{"model":"bench","messages":[{"role":"user","content":"hi"}]}`, `"content":"xxxxxx"`, 175},
		{"stream", `{"model":"bench","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, "data: [DONE]", 200},
	} {
		serve := requester(t, h, c.body, c.want)
		serve() // the first request fills caches
		// The request itself (NewRequest, its header) is counted too: 4.
		if n := testing.AllocsPerRun(200, serve); n > c.max {
			t.Errorf("%s: %v allocations a request, want at most %v", c.name, n, c.max)
		}
	}
}
