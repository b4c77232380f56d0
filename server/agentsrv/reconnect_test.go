package agentsrv

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/agentproto"
	"github.com/nbots/nb/provider/providertest"
)

// reconnectTo opens a reconnection to run id as the client of owner and
// returns the one frame it gets.
func reconnectTo(t *testing.T, serverURL, owner, id string) *agentproto.Frame {
	t.Helper()
	ac, err := agentproto.NewClient(serverURL, owner)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	conn, err := ac.Dial(ctx, ac.RunURL("Echo")+"?run_id="+id)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Abort()
	c := &client{t: t, conn: conn}
	f := c.next()
	if _, err := c.read(5 * time.Second); err != errClosed {
		t.Errorf("the reconnection stays open after its frame: %v", err)
	}
	return f
}

// Without a shared store, a client that reconnects with its run id gets
// the run's terminal frame (a finished run, a run cancelled when its
// connection went), an unknown_run error for an id it does not have, and
// run_in_progress while the run still runs on its connection; another
// owner's run is unknown.
func TestReconnect(t *testing.T) {
	url, _ := fakeOpenAI(t, func(turn providertest.Turn) providertest.Reply {
		if turn.LastUser() == "slow" {
			return providertest.Reply{Chunks: strings.Split(strings.Repeat("x", 30), ""), Delay: 100 * time.Millisecond}
		}
		return providertest.Echo(turn)
	})
	defer func(d time.Duration) { reconnectWait = d }(reconnectWait)
	reconnectWait = 500 * time.Millisecond
	// The owner is the bearer token.
	h := &Handler{Owner: func(r *http.Request) string { return r.Header.Get("Authorization") }}
	srv, _ := serve(t, h, newAgent(t, t.TempDir(), url, "Echo", ""))

	ann, _ := agentproto.NewClient(srv.URL, "ann")
	c := startWith(t, ann, "Echo", &agentproto.Frame{Input: "hello"})
	end := c.finish(nil)
	f := reconnectTo(t, srv.URL, "ann", end.RunID)
	if f.Type != agentproto.TypeFinalResult || f.RunID != end.RunID || f.Seq != 1 || f.Result != "echo: hello" {
		t.Errorf("a finished run: %+v", f)
	}
	if f := reconnectTo(t, srv.URL, "bob", end.RunID); f.Code != agentproto.CodeUnknownRun {
		t.Errorf("another owner: %+v", f)
	}
	if f := reconnectTo(t, srv.URL, "ann", "r_000000000000"); f.Code != agentproto.CodeUnknownRun || !strings.Contains(f.Message, "there is no run r_000000000000") {
		t.Errorf("an unknown run: %+v", f)
	}

	c = startWith(t, ann, "Echo", &agentproto.Frame{Input: "slow"})
	started := c.next()
	if f := reconnectTo(t, srv.URL, "ann", started.RunID); f.Code != agentproto.CodeRunInProgress || !strings.Contains(f.Message, "on this server") {
		t.Errorf("a run in progress: %+v", f)
	}
	c.conn.Abort() // the connection goes: the run is cancelled
	deadline := time.Now().Add(10 * time.Second)
	for {
		f := reconnectTo(t, srv.URL, "ann", started.RunID)
		if f.Code == agentproto.CodeCancelled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a run whose connection went: %+v", f)
		}
	}
}

// The runs are listed for the server's operator, the newest first, with
// their agent, start and state (running, then how they ended) and never
// their input or result.
func TestRunList(t *testing.T) {
	url, _ := fakeOpenAI(t, func(turn providertest.Turn) providertest.Reply {
		if turn.LastUser() == "slow" {
			return providertest.Reply{Chunks: strings.Split(strings.Repeat("x", 30), ""), Delay: 100 * time.Millisecond}
		}
		return providertest.Echo(turn)
	})
	h := &Handler{Owner: func(r *http.Request) string { return r.Header.Get("Authorization") }}
	srv, _ := serve(t, h, newAgent(t, t.TempDir(), url, "Echo", ""))
	ann, _ := agentproto.NewClient(srv.URL, "ann")
	done := startWith(t, ann, "Echo", &agentproto.Frame{Input: "hello secret"}).finish(nil)
	c := startWith(t, ann, "Echo", &agentproto.Frame{Input: "slow"})
	started := c.next()

	l, err := h.RunList(t.Context(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 2 || l[0].ID != started.RunID || l[1].ID != done.RunID {
		t.Fatalf("listed %+v, want %s then %s", l, started.RunID, done.RunID)
	}
	if e := l[0]; e.Label != "Echo" || e.Status != "running" || e.Owner != "Bearer ann" || time.Since(e.Created) > time.Minute {
		t.Errorf("the running run: %+v", e)
	}
	if e := l[1]; e.Label != "Echo" || e.Status != "finished" || e.Tokens <= 0 || time.Since(e.Created) > time.Minute {
		t.Errorf("the finished run: %+v", e)
	}
	for _, e := range l {
		if b, _ := json.Marshal(e); strings.Contains(string(b), "secret") {
			t.Errorf("the listing shows a run's contents: %s", b)
		}
	}
	c.conn.Abort() // the connection goes: the run is cancelled
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, err := h.RunList(t.Context(), 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(l) == 1 && l[0].Status == "failed: cancelled" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cancelled run is listed as %+v", l)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
