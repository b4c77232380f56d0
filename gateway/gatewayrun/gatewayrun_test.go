package gatewayrun

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channels"
	"github.com/nbots/nb/gateway/config"
	_ "github.com/nbots/nb/provider/openai" // the configuration's provider
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

// echo answers "echo: " and the last user message.
func echo(turn providertest.Turn) providertest.Reply {
	return providertest.Reply{Chunks: []string{"echo: ", turn.LastUser()}}
}

// testConfig writes and loads a configuration whose model is at
// modelURL, with the heartbeat off and more channels sections.
func testConfig(t testing.TB, modelURL string, sections map[string]any) *config.Config {
	t.Helper()
	dir := t.TempDir()
	chs := map[string]any{"sendProgress": false}
	for k, v := range sections {
		chs[k] = v
	}
	cfg := map[string]any{
		"agents":    map[string]any{"defaults": map[string]any{"workspace": filepath.Join(dir, "workspace"), "model": "gpt-4o-mini", "provider": "custom"}},
		"providers": map[string]any{"custom": map[string]any{"apiBase": modelURL, "apiKey": "test-key"}},
		"channels":  chs,
		"gateway":   map[string]any{"heartbeat": map[string]any{"enabled": false}},
	}
	data, _ := json.Marshal(cfg)
	path := filepath.Join(dir, "gateway.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(path, "", config.Env(nil))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// testOptions are the options of a test's gateway: a host with nb
// gateway's sandbox policy and a state folder of its own.
func testOptions(t testing.TB) Options {
	return Options{Host: bot.Host{Environ: []string{"HOME=" + t.TempDir()}}, StateDir: t.TempDir()}
}

// failing is a channel that fails once it has connected.
type failing struct{}

func (failing) Name() string                       { return "failing" }
func (failing) Capabilities() channel.Capabilities { return channel.Capabilities{} }
func (failing) Send(context.Context, bus.Outbound) (string, error) {
	return "", nil
}

func (failing) Run(ctx context.Context, _ channel.Inbox, ready func()) error {
	ready()
	return errors.New("the platform refused the token")
}

// failingOutbound is a bus whose outbound queue cannot be read.
type failingOutbound struct{ bus.Bus }

func (failingOutbound) Outbound(context.Context, string, func(context.Context, bus.Outbound) error) error {
	return errors.New("outbound queue: connection refused")
}

// settled waits until the goroutine count is back to base.
func settled(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines left running after Run returned (baseline %d):\n%s", runtime.NumGoroutine()-base, base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRunReturnsAChannelsFailure: a channel that fails stops the whole
// gateway (the loop, the dispatcher, the web chat, the features'
// background work); Run returns its failure, named, and leaves no
// goroutine behind.
func TestRunReturnsAChannelsFailure(t *testing.T) {
	model := httptest.NewServer(openaitest.New(echo))
	defer model.Close()
	c := testConfig(t, model.URL, map[string]any{"failing": map[string]any{"enabled": true, "allowFrom": []string{"*"}}})
	base := runtime.NumGoroutine()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := testOptions(t)
	o.Listeners = []net.Listener{ln}
	o.Channels = []channels.Factory{{Name: "failing", New: func(json.RawMessage, channel.Env) (channel.Channel, error) { return failing{}, nil }}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gw, err := Open(ctx, c, o)
	if err != nil {
		t.Fatal(err)
	}
	err = gw.Run(ctx)
	gw.Close()
	if err == nil || !strings.Contains(err.Error(), "channel failing: the platform refused the token") {
		t.Fatalf("Run = %v, want the channel's failure", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Run returned only when its context ended")
	}
	settled(t, base)
}

// TestRunReturnsTheDispatchersFailure: a dispatcher that cannot read the
// outbound queue (of the web chat) stops the gateway, and Run says so.
func TestRunReturnsTheDispatchersFailure(t *testing.T) {
	model := httptest.NewServer(openaitest.New(echo))
	defer model.Close()
	c := testConfig(t, model.URL, nil)
	base := runtime.NumGoroutine()
	local := bus.NewLocal()
	defer local.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := testOptions(t)
	o.Bus, o.Listeners = failingOutbound{local}, []net.Listener{ln}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	gw, err := Open(ctx, c, o)
	if err != nil {
		t.Fatal(err)
	}
	err = gw.Run(ctx)
	gw.Close()
	if err == nil || !strings.Contains(err.Error(), "the dispatcher: outbound queue: connection refused") {
		t.Fatalf("Run = %v, want the dispatcher's failure", err)
	}
	settled(t, base)
}

// TestRunEndsWithItsContext: a gateway stopped by its context returns
// nil, its listener closed, and no goroutine left.
func TestRunEndsWithItsContext(t *testing.T) {
	model := httptest.NewServer(openaitest.New(echo))
	defer model.Close()
	c := testConfig(t, model.URL, nil)
	base := runtime.NumGoroutine()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := testOptions(t)
	o.Listeners = []net.Listener{ln}
	ctx, cancel := context.WithCancel(context.Background())
	gw, err := Open(ctx, c, o)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- gw.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v, want nil once its context ended", err)
	}
	gw.Close()
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Error("the listener still accepts after Run returned")
	}
	settled(t, base)
}
