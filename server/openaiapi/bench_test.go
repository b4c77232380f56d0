package openaiapi

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
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

func (instant) RoundTrip(r *http.Request) (*http.Response, error) {
	io.Copy(io.Discard, r.Body) //nolint:errcheck // in memory
	r.Body.Close()
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
