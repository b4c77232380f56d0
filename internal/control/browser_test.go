package control

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/internal/httpguard"
	"github.com/nbots/nb/internal/metric"
	"github.com/nbots/nb/internal/npmtest"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/instrument"
)

// usageProvider answers every call with the same usage.
type usageProvider struct{ in, out int }

func (usageProvider) ID() string { return "openai" }

func (p usageProvider) Complete(context.Context, provider.Request, func(provider.Event)) (*provider.Response, error) {
	return &provider.Response{Text: "ok", Usage: provider.Usage{InputTokens: p.in, OutputTokens: p.out}}, nil
}

// TestControlPageInChromium drives the page in a real browser: Debian's
// chromium with playwright-core (scripts/install-debian-packages and
// scripts/fetch-npm install them). NB_SCREENSHOT=path keeps a picture.
func TestControlPageInChromium(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("SKIPPING: chromium is not installed: run scripts/install-debian-packages")
	}
	npmtest.Dir(t, "control")
	// The scripted traffic: 7 requests this minute, two calls of 100 + 23
	// tokens, a run in flight, an error.
	for range 7 {
		metric.HTTP(metric.Serve, "POST /v1/chat/completions", "POST", 200, 40*time.Millisecond)
	}
	metric.SetSource("serve")
	p := instrument.Provider(usageProvider{100, 23}, provider.Config{}, metric.ProviderLabels{Cartridge: "browser", Model: "browser-model"})
	for range 2 {
		if _, err := p.Complete(context.Background(), provider.Request{}, nil); err != nil {
			t.Fatal(err)
		}
	}
	end := metric.StartRun("run", "browser-cartridge")
	defer end(nil)
	metric.RecordError("provider openai", "browser-test-error: HTTP 500")

	tok, _ := httpguard.NewToken("", secret)
	h := New(Options{Server: "nb serve", Tokens: []*httpguard.Token{tok}, Tables: func(context.Context) []Table {
		return []Table{{ID: "cartridges", Title: "Cartridges", Columns: []string{"id", "status"}, Rows: [][]any{{"writer", "loaded"}, {"broken", "line 3: provider is missing"}}}}
	}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: h}
	go hs.Serve(ln) //nolint:errcheck // closed below
	defer hs.Close()
	url := "http://" + ln.Addr().String()

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	env := []string{"NB_URL=" + url, "CHROMIUM=" + chromium, "NB_TOKEN=" + secret, "NB_REQUESTS=7", "NB_MODEL=browser-model", "NB_TOKENS=246",
		"NB_RUN=browser-cartridge", "NB_ERROR=browser-test-error", "NB_TABLE=cartridges", "NB_CELL=line 3: provider is missing"}
	if shot := os.Getenv("NB_SCREENSHOT"); shot != "" {
		abs := shot
		if !filepath.IsAbs(abs) {
			abs = filepath.Join(npmtest.Root(t), shot) // from the repository's root
		}
		env = append(env, "NB_SHOT="+abs)
	}
	out, err := npmtest.Node(ctx, t, "control", "control.mjs", env...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("%v\n%s", err, out)
	}
}
