package provider

import (
	"encoding/json"
	"testing"
)

// TestDecodeJSON: a text decodes as encoding/json decodes it; one that
// is refused gives encoding/json's error, and nothing of the first
// attempt's partial decoding is left in v.
func TestDecodeJSON(t *testing.T) {
	type answer struct {
		Model string `json:"model"`
		N     int    `json:"n"`
	}
	var a answer
	if err := DecodeJSON([]byte(`{"model":"m","n":2,"extra":[1]}`), &a); err != nil || a != (answer{"m", 2}) {
		t.Fatalf("%+v, %v", a, err)
	}
	for _, text := range []string{`{"model":"m","n":"two"}`, `{"model":"m","n":2`, `{"model":"m"} trailing`} {
		var got, want answer
		err := DecodeJSON([]byte(text), &got)
		wantErr := json.Unmarshal([]byte(text), &want)
		if err == nil || wantErr == nil || err.Error() != wantErr.Error() || got != want {
			t.Errorf("%s: %+v, %v; encoding/json: %+v, %v", text, got, err, want, wantErr)
		}
	}
}
