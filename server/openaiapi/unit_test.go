package openaiapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/provider/providertest"
)

// The ids given to the client for a kept round carry its key; any other
// id is left alone.
func TestRoundIDs(t *testing.T) {
	key := newKey()
	id, k := splitID(markID("call_abc", key))
	if id != "call_abc" || k != key {
		t.Errorf("split %q %q", id, k)
	}
	for _, plain := range []string{"call_abc", "", "x_nb", "call_nb0123456789abcdeg", "toolu_01A09q90qw90lq917835lq9"} {
		if id, k := splitID(plain); id != plain || k != "" {
			t.Errorf("%q split into %q %q", plain, id, k)
		}
	}
}

// appendString writes what encoding/json writes (without HTML escaping).
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "quote \" back \\ slash", "\n\r\t\b\f\x00\x1f", "é ü 日本", "\u2028\u2029", "bad \xff utf8 \xe2\x82", "<&>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var want strings.Builder
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		enc.Encode(s) //nolint:errcheck // strings always encode
		got := string(appendString(nil, s))
		if got != strings.TrimSuffix(want.String(), "\n") {
			t.Errorf("appendString(%q) = %s, want %s", s, got, want.String())
		}
	})
}

// Two user messages in a row are one turn; system messages anywhere are
// system text; the last user message is the input, with its images.
func TestChatTurnConversation(t *testing.T) {
	s := newTestServer(t, providertest.Echo, map[string]string{"echo": cartridgeOn("openai", "")}, Options{})
	body := `{"model":"echo","messages":[
		{"role":"system","content":"S1"},
		{"role":"user","content":"a"},{"role":"user","content":[{"type":"text","text":"b"}]},
		{"role":"assistant","content":"A","reasoning_content":"thought"},
		{"role":"developer","content":[{"type":"text","text":"S2"}]},
		{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}},{"type":"image_url","image_url":{"url":"https://example.com/cat.jpg","detail":"low"}}]}]}`
	var req chatRequest
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	tr, err := s.h.chatTurn(r, &req)
	if err != nil {
		t.Fatal(err)
	}
	if tr.system != "S1\n\nS2" {
		t.Errorf("system %q", tr.system)
	}
	if len(tr.history) != 2 || tr.history[0].Message != "a\n\nb" || tr.history[1].Message != "A" || tr.history[1].Reasoning != "thought" {
		t.Errorf("history %+v", tr.history)
	}
	if tr.input == nil || tr.input.text != "look" || len(tr.input.images) != 2 {
		t.Fatalf("input %+v", tr.input)
	}
	if img := tr.input.images[0]; img.MediaType != "image/png" || string(img.Data) != "\x89PNG\r\n\x1a\n" {
		t.Errorf("image %+v", img)
	}
	if img := tr.input.images[1]; img.URL != "https://example.com/cat.jpg" {
		t.Errorf("image %+v", img)
	}
}

// The models a token may use, in OpenAI's list shape; broken cartridges
// are left out of the list.
func TestModels(t *testing.T) {
	s := newTestServer(t, providertest.Echo, map[string]string{"b": cartridgeOn("openai", ""), "a": cartridgeOn("ollama", "")}, Options{})
	cat := s.h.catalog.(*catalog)
	cat.models[0].Modified = time.Unix(1700000000, 0)
	cat.models = append(cat.models, Model{ID: "c", Err: errBroken})
	get := func(p string) (int, string) {
		resp, err := http.Get(s.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp.StatusCode, b.String()
	}
	if code, body := get("/v1/models"); code != 200 || body != `{"object":"list","data":[{"id":"a","object":"model","created":1700000000,"owned_by":"tests"},{"id":"b","object":"model","created":0,"owned_by":"tests"}]}` {
		t.Errorf("%d %s", code, body)
	}
	if code, body := get("/v1/models/b"); code != 200 || body != `{"id":"b","object":"model","created":0,"owned_by":"tests"}` {
		t.Errorf("%d %s", code, body)
	}
	if code, body := get("/v1/models/nope"); code != 404 || !strings.Contains(body, `"code":"model_not_found"`) {
		t.Errorf("%d %s", code, body)
	}
	if code, body := get("/v1/models/c"); code != 500 || !strings.Contains(body, "model c could not be loaded: broken") {
		t.Errorf("%d %s", code, body)
	}
}

var errBroken = &statusError{500, "broken"}
