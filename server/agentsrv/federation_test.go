package agentsrv

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/nbots/nb/agentproto"
	"github.com/nbots/nb/agents"
	"github.com/nbots/nb/provider/providertest"
)

// bearer lets through the requests with the token, and records the
// Authorization headers it saw.
type bearer struct {
	token string
	next  http.Handler
	mu    sync.Mutex
	seen  []string
}

func (b *bearer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	b.seen = append(b.seen, r.Header.Get("Authorization"))
	b.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+b.token {
		http.Error(w, `{"error":{"message":"a token is needed"}}`, http.StatusUnauthorized)
		return
	}
	b.next.ServeHTTP(w, r)
}

// server is one nb agent server of a federation test.
type fedServer struct {
	srv *httptest.Server
	rt  *agents.Runtime
	set *agents.Set
}

func newServer(t *testing.T, token string) *fedServer {
	t.Helper()
	set, _ := agents.NewSet()
	rt := agents.New(set)
	h := &Handler{Runtime: rt}
	mux := http.NewServeMux()
	h.Register(mux)
	var handler http.Handler = mux
	var auth *bearer
	if token != "" {
		auth = &bearer{token: token, next: mux}
		handler = auth
	}
	s := &fedServer{srv: httptest.NewServer(handler), rt: rt, set: set}
	t.Cleanup(s.srv.Close)
	return s
}

func (s *fedServer) runURL(name string) string {
	return "ws" + strings.TrimPrefix(s.srv.URL, "http") + "/agents/" + name + "/run"
}

func (s *fedServer) host() string {
	u, _ := url.Parse(s.srv.URL)
	return u.Host
}

// Two nb servers: A's agent has B's agent as a remote minion. B needs a
// token, which A has for B's host only. The client's tool is lent down
// the chain: B's agent calls it, the call is relayed to the client with
// its id and the minion's id, and the answer goes back to B. The
// minion's frames come to the client between minion_start and
// minion_result; its result reaches A's model.
func TestRemoteMinion(t *testing.T) {
	dir := t.TempDir()
	urlA, _ := fakeOpenAI(t, providertest.Echo)
	urlB, recB := fakeOpenAI(t, providertest.Echo)
	b := newServer(t, "token-for-b")
	a := newServer(t, "")
	a.rt.Remote.Tokens = map[string]string{b.host(): "token-for-b"}
	if err := b.set.Add(newAgent(t, dir, urlB, "Helper", "")); err != nil {
		t.Fatal(err)
	}
	if err := a.set.Add(newAgent(t, dir, urlA, "Boss", "agent:\n  minions:\n    - {name: Helper, url: \""+b.runURL("Helper")+"\"}\n")); err != nil {
		t.Fatal(err)
	}
	c := start(t, a.srv.URL, "Boss", &agentproto.Frame{Input: `call Helper {"input":"call clock {}"}`, Chunks: true,
		Tools: []agentproto.ToolRepr{{Name: "clock", Description: "The user's clock."}}, Context: map[string]any{"trace": "x"}})
	var relayed *agentproto.Frame
	end := c.finish(func(f *agentproto.Frame) {
		if f.Type == agentproto.TypeToolCall {
			relayed = f
			c.send(&agentproto.Frame{Type: agentproto.TypeToolResult, ID: f.ID, Output: "noon"})
		}
	})
	if end.Type != agentproto.TypeFinalResult || end.Result != "tool Helper said: tool clock said: noon" {
		t.Fatalf("end %+v\n%s", end, c.dump())
	}
	if relayed == nil || relayed.MinionID != "m1" || relayed.Name != "clock" {
		t.Fatalf("relayed call %+v", relayed)
	}
	// The call id is B's own, preserved end to end.
	if !strings.Contains(string(recB.Bodies()[1]), "noon") {
		t.Errorf("the client's answer did not reach B: %s", recB.Bodies()[1])
	}
	got := c.types()
	for _, want := range []string{"run_started step minion_start@m1 step@m1 tool_call@m1 step_chunk@m1", "step@m1 minion_result@m1 step_chunk", "step_chunk step final_result"} {
		if !strings.Contains(got, want) {
			t.Errorf("frames %s, want %s", got, want)
		}
	}
	for _, f := range c.all {
		if f.Type == agentproto.TypeMinionResult && (f.Result != "tool clock said: noon" || f.IsError) {
			t.Errorf("minion_result %+v", f)
		}
		if f.Type == agentproto.TypeMinionStart && (f.Input != "call clock {}" || f.URL != b.runURL("Helper")) {
			t.Errorf("minion_start %+v", f)
		}
	}
	// B saw A's token for B, and nothing else.
	auth := b.srv.Config.Handler.(*bearer)
	for _, h := range auth.seen {
		if h != "Bearer token-for-b" {
			t.Errorf("B saw Authorization %q", h)
		}
	}
	if len(auth.seen) == 0 {
		t.Error("B was never asked")
	}

	// Without the token, the minion fails and A's model is told: the
	// run itself ends with a result.
	a.rt.Remote.Tokens = nil
	c = start(t, a.srv.URL, "Boss", &agentproto.Frame{Input: `call Helper {"input":"hi"}`})
	end = c.finish(nil)
	if end.Type != agentproto.TypeFinalResult || !strings.Contains(end.Result.(string), "tool Helper said: The agent Helper failed (minion_failed)") ||
		!strings.Contains(end.Result.(string), "HTTP 401") {
		t.Errorf("end %+v\n%s", end, c.dump())
	}
	if !strings.Contains(c.types(), "minion_start@m1 error@m1 minion_result@m1") {
		t.Errorf("frames %s", c.types())
	}
}

// A cycle between two servers is refused with an error frame that
// names the chain; the run that asked gets it as a failed call.
func TestFederationCycle(t *testing.T) {
	dir := t.TempDir()
	url, _ := fakeOpenAI(t, providertest.Echo)
	a := newServer(t, "")
	b := newServer(t, "")
	a.rt.ID, b.rt.ID = "server-a", "server-b"
	a.set.Add(newAgent(t, dir, url, "Alpha", "agent:\n  minions:\n    - {name: Beta, url: \""+b.runURL("Beta")+"\"}\n"))
	b.set.Add(newAgent(t, dir, url, "Beta", "agent:\n  minions:\n    - {name: Alpha, url: \""+a.runURL("Alpha")+"\"}\n"))
	c := start(t, a.srv.URL, "Alpha", &agentproto.Frame{Input: `call Beta {"input":"call Alpha {\"input\":\"loop\"}"}`})
	end := c.finish(nil)
	var refusal *agentproto.Frame
	for _, f := range c.all {
		if f.Type == agentproto.TypeError && f.Code == agentproto.CodeFederationRefused {
			refusal = f
		}
	}
	if refusal == nil || refusal.MinionID != "m1/m1" || len(refusal.Chain) != 3 ||
		!strings.Contains(refusal.Message, "server-a/Alpha#r_") || !strings.Contains(refusal.Message, "server-b/Beta#r_") {
		t.Fatalf("refusal %+v\n%s", refusal, c.dump())
	}
	if end.Type != agentproto.TypeFinalResult || !strings.Contains(end.Result.(string), "federation_refused") {
		t.Errorf("end %+v", end)
	}
	// A run frame whose chain already holds the server is refused at once.
	c = start(t, b.srv.URL, "Beta", &agentproto.Frame{Input: "hi", Chain: []agentproto.Hop{{Server: "server-b", RunID: "r_1", Agent: "Beta"}}})
	end = c.finish(nil)
	if end.Code != agentproto.CodeFederationRefused || !strings.Contains(end.Message, "server-b/Beta#r_1 -> server-b/Beta") {
		t.Errorf("end %+v", end)
	}
	// So is a chain deeper than the limit.
	var chain []agentproto.Hop
	for _, s := range []string{"s1", "s2", "s3", "s4", "s5"} {
		chain = append(chain, agentproto.Hop{Server: s})
	}
	end = start(t, b.srv.URL, "Beta", &agentproto.Frame{Input: "hi", Chain: chain}).finish(nil)
	if end.Code != agentproto.CodeFederationRefused || !strings.Contains(end.Message, "deeper than 5") {
		t.Errorf("deep chain: %+v", end)
	}
}

// A client may name a remote minion only on a host the server allows.
func TestClientMinionHosts(t *testing.T) {
	dir := t.TempDir()
	url, _ := fakeOpenAI(t, providertest.Echo)
	a := newServer(t, "")
	b := newServer(t, "")
	a.set.Add(newAgent(t, dir, url, "Alpha", ""))
	b.set.Add(newAgent(t, dir, url, "Beta", ""))
	run := &agentproto.Frame{Input: `call Far {"input":"hi"}`, Minions: []agentproto.MinionRef{{AgentRepr: agentproto.AgentRepr{Name: "Far"}, URL: b.runURL("Beta")}}}
	end := start(t, a.srv.URL, "Alpha", run).finish(nil)
	if end.Code != agentproto.CodeValidation || !strings.Contains(end.Message, "does not run minions on "+b.host()) {
		t.Fatalf("end %+v", end)
	}
	a.rt.Remote.AllowHosts = []string{b.host()}
	end = start(t, a.srv.URL, "Alpha", run).finish(nil)
	if end.Result != "tool Far said: echo: hi" {
		t.Errorf("end %+v", end)
	}
}
