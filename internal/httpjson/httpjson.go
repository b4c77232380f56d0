// Package httpjson writes the JSON answers of nb's HTTP servers (nb
// serve's APIs, the agent protocol, the robopages API) one way: in one
// write with a Content-Length, without HTML escaping.
package httpjson

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
)

// Write answers with v as JSON in one write with a Content-Length
// (clients that decode each read on its own, as the VS Code plugin does,
// never see a character split), without HTML escaping. A value that
// cannot be encoded is answered 500 with a JSON error.
func Write(w http.ResponseWriter, status int, v any) {
	b, err := Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"message":"cannot encode the answer"}}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b) //nolint:errcheck // the client went away
}

// Marshal encodes v without HTML escaping and without a trailing newline.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
