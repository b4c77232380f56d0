package web

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nbots/nb/gateway"
	"github.com/nbots/nb/internal/httpguard"
)

// TestReadyChecks: /ready fails, naming the check and its reason, when
// a store the gateway needs cannot be reached.
func TestReadyChecks(t *testing.T) {
	var storeErr error
	s := &Server{Gateway: &gateway.Gateway{}, Checks: []httpguard.Check{{Name: "store", Run: func(context.Context) error { return storeErr }}}}
	get := func() (int, string) {
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, httptest.NewRequest("GET", "http://localhost/ready", nil))
		return w.Code, strings.TrimSpace(w.Body.String())
	}
	if code, body := get(); code != 200 || body != `{"channels":{},"checks":{"store":"ok"},"ready":true}` {
		t.Errorf("ready: %d %s", code, body)
	}
	storeErr = errors.New("PostgreSQL postgres://db/nb: reach the database: refused")
	if code, body := get(); code != 503 || body != `{"channels":{},"checks":{"store":"PostgreSQL postgres://db/nb: reach the database: refused"},"ready":false}` {
		t.Errorf("not ready: %d %s", code, body)
	}
}
