package web

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/internal/npmtest"
)

// TestWebChatInChromium drives the page in a real browser: Debian's
// chromium with playwright-core (scripts/install-debian-packages and
// scripts/fetch-npm install them).
func TestWebChatInChromium(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("SKIPPING: chromium is not installed: run scripts/install-debian-packages")
	}
	srv, _ := start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := npmtest.Node(ctx, t, "webchat", "webchat.mjs", "NB_URL="+srv.URL+"/", "CHROMIUM="+chromium)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("%v\n%s", err, out)
	}
}
