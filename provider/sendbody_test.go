package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestSendBodyIsEncodingJSON: Send encodes a body with segmentio's
// encoder for speed; the bytes a provider receives are encoding/json's
// (keys sorted, HTML escaped, raw messages compacted, floats, invalid
// UTF-8 and U+2028 written alike).
func TestSendBodyIsEncodingJSON(t *testing.T) {
	var got []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		w.Write([]byte("{}")) //nolint:errcheck // a test's answer
	}))
	defer srv.Close()
	type part struct {
		Raw json.RawMessage `json:"raw,omitempty"`
		N   *int            `json:"n,omitempty"`
		F   float64         `json:"f"`
	}
	body := map[string]any{
		"model": "m", "stream": true, "temperature": 0.1,
		"floats":   []any{1.5, 1e21, 1e-7, 123456789.0, float32(0.1)},
		"html":     "<b>&</b>",
		"bad":      "\xff\xfe",
		"lines":    "\u2028\u2029",
		"nothing":  nil,
		"raw":      part{Raw: json.RawMessage(" { \"b\" : 1 ,\n \"a\":[ 1, 2 ] } "), F: 3},
		"number":   json.Number("12.50"),
		"bytes":    []byte("bytes"),
		"tools":    []any{map[string]any{"type": "function", "function": map[string]any{"name": "f", "parameters": map[string]any{"type": "object", "required": []any{"z", "a"}}}}},
		"messages": []any{map[string]any{"role": "user", "content": "héllo"}},
	}
	rc, _, err := Send(context.Background(), HTTPRequest{Provider: "test", URL: srv.URL, Body: body, Client: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	want, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("sent\n%s\nencoding/json writes\n%s", got, want)
	}
}
