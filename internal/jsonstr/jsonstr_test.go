package jsonstr

import (
	"bytes"
	"encoding/json"
	"testing"
)

// Append writes what encoding/json writes without HTML escaping.
func TestAppendAsEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "q\"b\\s/", "\n\r\t\b\f\x00\x1f", "<a&b>", "é ü 日本 🙂", "\u2028\u2029", "bad \xff\xfe utf8 \xe2\x82", "\x7f"} {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		enc.Encode(s) //nolint:errcheck // a string encodes
		if got := string(Append(nil, s)); got != string(bytes.TrimSuffix(want.Bytes(), []byte("\n"))) {
			t.Errorf("%q: %s, want %s", s, got, want.Bytes())
		}
	}
}
