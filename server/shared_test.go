package server_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nbots/nb/eventlog"
	"github.com/nbots/nb/server"
)

// downStore is a shared store whose reachability the test sets.
type downStore struct {
	eventlog.Shared
	down atomic.Bool
}

func (s *downStore) Err() error {
	if s.down.Load() {
		return errors.New("the shared store postgres://db/nb is unreachable: connection refused")
	}
	return nil
}

// A server that cannot reach its shared store takes no work: every route
// but /healthz and /ready answers 503 saying why, in the route family's
// shape, and /ready fails saying so; it takes work again when the store
// answers.
func TestSharedStoreUnreachable(t *testing.T) {
	store := &downStore{}
	srv, err := server.New(context.Background(), server.Options{Dirs: []string{t.TempDir()}, WatchInterval: -1, Shared: store})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "models") })
	srv.HandleFunc("GET /cartridges", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "cartridges") })
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	get := func(path string) (int, string, http.Header) {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	if code, body, _ := get("/ready"); code != 200 || !strings.Contains(body, `"ready":true`) {
		t.Errorf("ready: %d %s", code, body)
	}
	store.down.Store(true)
	if code, body, _ := get("/ready"); code != 503 || !strings.Contains(body, `"ready":false`) || !strings.Contains(body, `"serve state":"the shared store postgres://db/nb is unreachable: connection refused"`) {
		t.Errorf("ready while down: %d %s", code, body)
	}
	if code, _, _ := get("/healthz"); code != 200 {
		t.Errorf("healthz while down: %d", code)
	}
	for _, path := range []string{"/v1/models", "/cartridges"} {
		code, body, h := get(path)
		if code != 503 || !strings.Contains(body, "this replica takes no work: the shared store postgres://db/nb is unreachable") || h.Get("Retry-After") == "" {
			t.Errorf("%s while down: %d %s", path, code, body)
		}
		if path == "/v1/models" && !strings.Contains(body, `"code":"store_unreachable"`) {
			t.Errorf("%s: not in OpenAI's shape: %s", path, body)
		}
	}
	store.down.Store(false)
	if code, body, _ := get("/cartridges"); code != 200 || body != "cartridges" {
		t.Errorf("back: %d %s", code, body)
	}
}
