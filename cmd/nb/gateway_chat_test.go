package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// nb gateway chat -m exits 1 when the turn fails, with the provider's
// reason in the configuration's words (the README's promise).
func TestGatewayChatFails(t *testing.T) {
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"message":"Incorrect API key provided: bad-key","type":"invalid_request_error","code":"invalid_api_key"}}`)
	}))
	defer model.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.json")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`{"agents": {"defaults": {"model": "m", "provider": "custom", "workspace": %q}},
  "providers": {"custom": {"apiBase": %q, "apiKey": "bad-key"}}, "gateway": {"heartbeat": {"enabled": false}}}`, filepath.Join(dir, "ws"), model.URL)), 0o600)
	code, out, errs := runNBInput(t, []string{"XDG_STATE_HOME=" + filepath.Join(dir, "state")}, "", "gateway", "chat", "--config", cfg, "-m", "hi")
	if code != 1 || !strings.Contains(errs, "Incorrect API key provided") || !strings.Contains(errs, "check providers.custom.apiKey") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", code, out, errs)
	}
}
