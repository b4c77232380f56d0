package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/internal/testbuf"
	_ "github.com/nbots/nb/provider/openai"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

// fixture is a server on a folder of cartridges, with the OpenAI fake as
// every cartridge's provider and a log kept for inspection.
type fixture struct {
	t    *testing.T
	dir  string
	srv  *Server
	fake *openaitest.Server
	http *httptest.Server
	log  *testbuf.Buffer
}

// cart is a cartridge on the fake provider.
func cart(name string, extra ...string) string {
	return "meta: {name: " + name + ", author: Tests, version: 1.0.0}\n" +
		"provider: {id: openai, credentials: {address: ENV/OPENAI_API_ADDRESS, access-token: ENV/OPENAI_API_KEY}, settings: {model: m}}\n" +
		strings.Join(extra, "\n")
}

func newFixture(t *testing.T, files map[string]string, configure func(*Options)) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: t.TempDir(), log: &testbuf.Buffer{}, fake: openaitest.New(providertest.Echo)}
	write(t, f.dir, files)
	fake := httptest.NewServer(f.fake)
	t.Cleanup(fake.Close)
	home := t.TempDir()
	opts := Options{
		Dirs:             []string{f.dir},
		Host:             bot.Host{Environ: []string{"OPENAI_API_ADDRESS=" + fake.URL, "OPENAI_API_KEY=sk-server-secret", "HOME=" + home}},
		WatchInterval:    -1,
		ClientCartridges: true,
		ClientHosts:      []string{"127.0.0.1"}, // the fake providers
		Log:              slog.New(slog.NewTextHandler(f.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Limits:           Limits{Names: serveNames},
	}
	if configure != nil {
		configure(&opts)
	}
	srv, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	t.Cleanup(func() { srv.Close() })
	return f
}

// serve mounts h on the fixture's server and starts answering over HTTP.
func (f *fixture) serve(routes map[string]http.HandlerFunc) string {
	for p, h := range routes {
		f.srv.HandleFunc(p, h)
	}
	f.http = httptest.NewServer(f.srv.Handler())
	f.t.Cleanup(f.http.Close)
	return f.http.URL
}

func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, src := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// serveNames are the limits' names as nb serve gives them (its flags).
var serveNames = LimitNames{RunTimeout: "--run-timeout", MaxBody: "--max-body", BodyMinRate: "--body-min-rate", BodyTimeout: "--body-timeout",
	Rate: "--rate", ClientHosts: "nb serve --client-hosts", AllowTool: "start nb serve with --allow-tool NAME or --yes",
	Conns: "start nb serve with a higher --max-client-conns (or name your proxy with --trusted-proxies)"}
