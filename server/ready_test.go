package server

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
)

// TestReady: /ready needs no token, passes when every check does, and
// says which failed and why (503) otherwise.
func TestReady(t *testing.T) {
	tok, _ := NewToken("", "s3cret-token-0123456789")
	var storeErr error
	f := newFixture(t, nil, func(o *Options) {
		o.Tokens = []*Token{tok}
		o.Checks = []Check{
			{Name: "store", Run: func(context.Context) error { return storeErr }},
			{Name: "bus", Run: func(ctx context.Context) error { return nil }},
		}
	})
	url := f.serve(nil)
	read := func() (int, map[string]any) {
		resp, body := get(t, "GET", url+"/ready", "")
		var out map[string]any
		if err := json.Unmarshal([]byte(body), &out); err != nil {
			t.Fatalf("/ready: %d %s", resp.StatusCode, body)
		}
		return resp.StatusCode, out
	}
	if code, out := read(); code != 200 || out["ready"] != true || out["checks"].(map[string]any)["store"] != "ok" {
		t.Errorf("ready: %d %v", code, out)
	}
	storeErr = errors.New("PostgreSQL postgres://db:5432/nb: reach the database: connection refused")
	if code, out := read(); code != 503 || out["ready"] != false || out["checks"].(map[string]any)["store"] != storeErr.Error() || out["checks"].(map[string]any)["bus"] != "ok" {
		t.Errorf("not ready: %d %v", code, out)
	}
}
