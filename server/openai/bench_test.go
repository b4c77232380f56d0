package openai

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
