package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nbots/nb/agentproto"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

// nb serve serves the agent protocol behind its token: the cartridges
// and the minion file's agents, with the server's id in chains; nb
// agents reaches it with NB_AGENTS_TOKEN.
func TestServeAgents(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nb serve")
	}
	fake := httptest.NewServer(openaitest.New(providertest.Echo))
	defer fake.Close()
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cartridges := filepath.Join(dir, "cartridges")
	os.Mkdir(cartridges, 0o755)
	write("cartridges/writer.yml", "meta: {name: Writer, description: Writes.}\nprovider: {id: openai, credentials: {address: ENV/OPENAI_API_ADDRESS, access-token: k}, settings: {model: m}}\n")
	minions := write("minions.yaml", "- name: Helper\n  description: helps\n  prompt: Help.\n  tool_names: []\n")
	hosts := write("hosts", "127.0.0.1:1 ENV/REMOTE_TOKEN\n")
	const token = "a-secret-of-more-than-16-characters"
	env := []string{"OPENAI_API_ADDRESS=" + fake.URL, "OPENAI_API_KEY=k", "NB_SERVE_TOKEN=" + token, "REMOTE_TOKEN=r"}
	server, url, stderr := nbServe(t, cartridges, env, "--agent-minions", minions, "--agent-hosts", hosts, "--agent-id", "srv-1")

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	anon, _ := agentproto.NewClient(url, "")
	var he *agentproto.HTTPError
	if _, err := anon.Agents(ctx); !errors.As(err, &he) || he.Status != http.StatusUnauthorized {
		t.Fatalf("without a token: %v", err)
	}
	if _, err := anon.Start(ctx, "Writer", &agentproto.Frame{Input: "hi"}); err == nil || !strings.Contains(err.Error(), "HTTP 401") {
		t.Errorf("a run without a token: %v", err)
	}
	c, _ := agentproto.NewClient(url, token)
	list, err := c.Agents(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range list {
		names = append(names, a.Name)
	}
	if got := strings.Join(names, " "); got != "Helper Writer default" {
		t.Errorf("agents %s", got)
	}
	run := func(name string, f *agentproto.Frame) *agentproto.Frame {
		conn, err := c.Start(ctx, name, f)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Abort()
		for {
			fr, err := conn.Read(ctx)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if fr.Terminal() {
				return fr
			}
		}
	}
	if end := run("Writer", &agentproto.Frame{Input: "hi"}); end.Result != "echo: hi" {
		t.Errorf("Writer: %+v", end)
	}
	if end := run("Helper", &agentproto.Frame{Input: "a task"}); end.Result != "echo: a task" {
		t.Errorf("Helper: %+v", end)
	}
	if end := run("Writer", &agentproto.Frame{Input: "hi", Chain: []agentproto.Hop{{Server: "srv-1"}}}); end.Code != agentproto.CodeFederationRefused {
		t.Errorf("a cycle: %+v", end)
	}

	// nb agents with NB_AGENTS_TOKEN.
	self, _ := os.Executable()
	bin := filepath.Join(t.TempDir(), "nb")
	os.Symlink(self, bin)
	cmd := exec.Command(bin, "agents", "run", url+"/Writer", "from the command line")
	cmd.Env = []string{"HOME=" + t.TempDir(), "NB_AGENTS_TOKEN=" + token, "NB_DOTENV=0"}
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "echo: from the command line" {
		t.Errorf("nb agents run: %v\n%s", err, out)
	}
	// The server's log, once it has stopped writing it.
	server.Process.Signal(syscall.SIGTERM) //nolint:errcheck // checked by Wait
	server.Wait()                          //nolint:errcheck // its log is what matters
	if !strings.Contains(stderr.String(), "/agents/Writer/run") {
		t.Errorf("the upgrades are not in the server's log:\n%s", stderr)
	}
}

// The hosts nb serve's agents may reach: a list on the command line
// (--agent-hosts, as --client-hosts), their tokens in a file
// (--agent-tokens); a file given to --agent-hosts is read as tokens, as
// before.
func TestAgentHostsAndTokens(t *testing.T) {
	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("# remote servers\nagents.example:4000 ENV/REMOTE_TOKEN\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := func(name string) (string, bool) { return "r-token", name == "REMOTE_TOKEN" }
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	a := &App{Stderr: stderr}
	r, err := a.remoteHosts([]string{"127.0.0.1:4001", "other.example"}, tokens, env)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.AllowHosts, " "); got != "agents.example:4000 127.0.0.1:4001 other.example" || r.Tokens["agents.example:4000"] != "r-token" || len(r.Tokens) != 1 {
		t.Fatalf("hosts %q, tokens %d", got, len(r.Tokens))
	}
	r, err = a.remoteHosts([]string{tokens}, "", env)
	if err != nil || strings.Join(r.AllowHosts, " ") != "agents.example:4000" || r.Tokens["agents.example:4000"] != "r-token" {
		t.Fatalf("the older form: %+v, %v", r, err)
	}
	if said, _ := os.ReadFile(stderr.Name()); !strings.Contains(string(said), "--agent-hosts FILE is deprecated: write --agent-tokens "+tokens) {
		t.Fatalf("the older form is not said to be deprecated: %q", said)
	}
	if _, err := a.remoteHosts([]string{"ok.example", "http://bad/x"}, "", env); err == nil || !strings.Contains(err.Error(), `--agent-hosts: "http://bad/x" is not a host or host:port`) {
		t.Fatalf("a bad host: %v", err)
	}
}
