package ollama_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nbots/nb/provider"
	_ "github.com/nbots/nb/provider/ollama"
	"github.com/nbots/nb/provider/ollama/ollamatest"
	"github.com/nbots/nb/provider/providertest"
)

func setup(t *testing.T, brain providertest.Brain) (provider.Provider, *ollamatest.Server) {
	t.Helper()
	fake := ollamatest.New(brain)
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	p, err := provider.New(provider.Config{ID: "ollama", Credentials: map[string]any{"address": srv.URL},
		Settings: map[string]any{"model": "llama3", "options": map[string]any{"temperature": 0.8, "num_ctx": 1024}, "format": nil}, HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	return p, fake
}

func TestStream(t *testing.T) {
	p, fake := setup(t, providertest.Echo)
	var deltas []string
	resp, err := p.Complete(context.Background(), provider.Request{System: "S", Messages: []provider.Message{{Role: provider.RoleUser, Content: "hi there"}}, Stream: true},
		func(ev provider.Event) { deltas = append(deltas, ev.Text) })
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "echo: hi there" || strings.Join(deltas, "") != resp.Text || len(deltas) < 3 {
		t.Fatalf("%q %q", resp.Text, deltas)
	}
	if resp.Usage.OutputTokens != 282 || resp.FinishReason != "stop" {
		t.Errorf("%+v", resp)
	}
	want := map[string]any{"model": "llama3", "stream": true, "options": map[string]any{"temperature": 0.8, "num_ctx": 1024.0},
		"messages": []any{map[string]any{"role": "system", "content": "S"}, map[string]any{"role": "user", "content": "hi there"}}}
	if diff := cmp.Diff(want, fake.Recorder.Last()); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}

func TestWholeAndTools(t *testing.T) {
	p, fake := setup(t, providertest.Scripted(providertest.Reply{Calls: []providertest.Call{{Name: "a", Arguments: `{"x":1}`}, {Name: "b", Arguments: `{}`}}}))
	seen := map[string]bool{}
	for _, stream := range []bool{false, true} {
		if stream {
			fake.Brain = providertest.Scripted(providertest.Reply{Calls: []providertest.Call{{Name: "a", Arguments: `{"x":1}`}, {Name: "b", Arguments: `{}`}}})
		}
		resp, err := p.Complete(context.Background(), provider.Request{Stream: stream, Messages: []provider.Message{{Role: provider.RoleUser, Content: "go"}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		// Ollama sends no ids: nb invents ones unique across answers.
		want := []provider.ToolCall{{Name: "a", Arguments: `{"x":1}`}, {Name: "b", Arguments: `{}`}}
		got := append([]provider.ToolCall(nil), resp.ToolCalls...)
		for i := range got {
			if !strings.HasPrefix(got[i].ID, "call_") || seen[got[i].ID] {
				t.Errorf("stream=%v: id %q not new", stream, got[i].ID)
			}
			seen[got[i].ID] = true
			got[i].ID = ""
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("stream=%v (-want +got):\n%s", stream, diff)
		}
	}
}

func TestErrors(t *testing.T) {
	for _, status := range []int{400, 401, 404, 429, 500} {
		p, _ := setup(t, providertest.Scripted(providertest.Reply{Status: status}))
		_, err := p.Complete(context.Background(), provider.Request{Stream: true}, nil)
		var pe *provider.Error
		if !errors.As(err, &pe) || pe.Status != status {
			t.Fatalf("%d: %v", status, err)
		}
		msg, _ := provider.ParseErrorBody([]byte(ollamatest.ErrorBodies[status]))
		if !strings.Contains(err.Error(), msg) {
			t.Errorf("%d: %q lacks %q", status, err, msg)
		}
	}
	p, _ := setup(t, providertest.Scripted(providertest.Reply{Chunks: []string{"a"}, StreamError: "model runner crashed"}))
	if _, err := p.Complete(context.Background(), provider.Request{Stream: true}, nil); err == nil || !strings.Contains(err.Error(), "model runner crashed") {
		t.Fatalf("mid-stream: %v", err)
	}
	p, _ = setup(t, providertest.Scripted(providertest.Reply{Chunks: []string{"a", "b"}, CutAfter: 1}))
	if _, err := p.Complete(context.Background(), provider.Request{Stream: true}, nil); err == nil {
		t.Fatal("dropped stream not reported")
	}
}

// An error line is retried like the other providers' mid-stream errors:
// only when no text had reached the user.
func TestStreamErrorRetryable(t *testing.T) {
	for _, tt := range []struct {
		body      string
		retryable bool
	}{
		{`{"error":"model runner crashed"}` + "\n", true},
		{`{"message":{"content":"a"},"done":false}` + "\n" + `{"error":"model runner crashed"}` + "\n", false},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/x-ndjson")
			io.WriteString(w, tt.body)
		}))
		p, err := provider.New(provider.Config{ID: "ollama", Credentials: map[string]any{"address": srv.URL}, HTTPClient: srv.Client()})
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Complete(context.Background(), provider.Request{Stream: true}, nil)
		srv.Close()
		var pe *provider.Error
		if !errors.As(err, &pe) || provider.IsRetryable(err) != tt.retryable || pe.Streamed == tt.retryable {
			t.Errorf("%q: %v retryable=%v", tt.body, err, provider.IsRetryable(err))
		}
	}
}
