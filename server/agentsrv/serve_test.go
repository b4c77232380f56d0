package agentsrv

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/agentproto"
	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/server"
)

// Mounted on nb serve's core, the protocol answers per token: a token
// sees and runs the cartridges it may use; runs count as the server's
// runs (429 beyond its limit); a run keeps its bot while the cartridge
// is reloaded; a cartridge whose agent block is wrong is refused by name
// with why.
func TestMount(t *testing.T) {
	url, _ := fakeOpenAI(t, providertest.Echo)
	dir := t.TempDir()
	cart := func(name, extra string) string {
		return "meta: {name: " + name + "}\nsafety: {tools: {confirmable: false}}\nprovider: {id: openai, credentials: {address: " + url + ", access-token: k}, settings: {model: m}}\n" + extra
	}
	files := map[string]string{
		"writer.yml":     cart("Writer", ""),
		"team/coder.yml": cart("Coder", ""),
		"twin.yml":       cart("Writer", ""),
		"broken.yml":     cart("Broken", "agent: {type: babyagi}\n"),
	}
	for name, src := range files {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(src), 0o644)
	}
	team, _ := server.NewToken("team", "team-secret-0123456789")
	team.Cartridges = []string{"team/*"}
	all, _ := server.NewToken("all", "all-secret-0123456789ab")
	srv, err := server.New(context.Background(), server.Options{Dirs: []string{dir}, Tokens: []*server.Token{team, all}, WatchInterval: -1,
		Host: bot.Host{Environ: []string{"HOME=" + t.TempDir()}}, Limits: server.Limits{MaxRuns: 1}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	Mount(srv, &Handler{}, nil)
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	names := func(token string) string {
		c, _ := agentproto.NewClient(hs.URL, token)
		list, err := c.Agents(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range list {
			out = append(out, a.Name)
		}
		return strings.Join(out, " ")
	}
	if got := names("team-secret-0123456789"); got != "Coder" {
		t.Errorf("team sees %s", got)
	}
	if got := names("all-secret-0123456789ab"); got != "Coder twin writer" && got != "Coder default twin writer" {
		t.Errorf("all sees %s", got)
	}
	// A run is uncounted just after its last frame: with one run at most,
	// wait for it before starting the next.
	idle := func() {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for srv.Active() != 0 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	teamClient, _ := agentproto.NewClient(hs.URL, "team-secret-0123456789")
	end := startWith(t, teamClient, "writer", &agentproto.Frame{Input: "hi"}).finish(nil)
	if end.Code != agentproto.CodeUnknownAgent || !strings.Contains(end.Message, "this token may not use the cartridge") {
		t.Errorf("a forbidden agent: %+v", end)
	}
	allClient, _ := agentproto.NewClient(hs.URL, "all-secret-0123456789ab")
	idle()
	end = startWith(t, allClient, "broken", &agentproto.Frame{Input: "hi"}).finish(nil)
	if end.Code != agentproto.CodeCartridge || !strings.Contains(end.Message, "agent.type: must be one of functions, react, plan") {
		t.Errorf("a broken agent: %+v", end)
	}

	// One run in progress at most: the second is refused before the
	// upgrade, unless the first waits on its client.
	idle()
	c := startWith(t, teamClient, "Coder", &agentproto.Frame{Input: "call now {}", Tools: []agentproto.ToolRepr{{Name: "now"}}})
	var call *agentproto.Frame
	for call == nil {
		if f := c.next(); f.Type == agentproto.TypeToolCall {
			call = f
		}
	}
	// The run waits on its client's tool: it counts against its token's
	// runs (one, the server's limit), not against the runs in progress,
	// so another token's run goes on.
	if _, err = teamClient.Start(ctx, "Coder", &agentproto.Frame{Input: "hi"}); err == nil || !strings.Contains(err.Error(), "HTTP 429") {
		t.Errorf("a second run of the waiting token: %v", err)
	}
	if end := startWith(t, allClient, "writer", &agentproto.Frame{Input: "hi"}).finish(nil); end.Type != agentproto.TypeFinalResult {
		t.Errorf("another token's run while one waits: %+v", end)
	}
	idle1 := func() {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for srv.Active() != 1 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	idle1()
	// The cartridge changes on disk while the run waits: it finishes on
	// its bot.
	os.WriteFile(filepath.Join(dir, "team", "coder.yml"), []byte(cart("Coder", "# changed\n")), 0o644)
	srv.Rescan(ctx)
	c.send(&agentproto.Frame{Type: agentproto.TypeToolResult, ID: call.ID, Output: "noon"})
	if end := c.finish(nil); end.Result != "tool now said: noon" {
		t.Errorf("end %+v", end)
	}
	// Without a token, nothing.
	anon, _ := agentproto.NewClient(hs.URL, "")
	var herr *agentproto.HTTPError
	if _, err := anon.Agents(ctx); !errors.As(err, &herr) || herr.Status != http.StatusUnauthorized {
		t.Errorf("without a token: %v", err)
	}
}
