package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/agentproto"
	"github.com/nbots/nb/internal/pgtest"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

// startPostgres starts a throw-away PostgreSQL cluster for this test and
// returns a new database's URL and the cluster (for superuser SQL). It
// skips loudly without PostgreSQL (fails under CI).
func startPostgres(t *testing.T) (string, *pgtest.Cluster) {
	t.Helper()
	c, err := pgtest.Start(pgtest.Options{})
	if err != nil {
		if errors.Is(err, pgtest.ErrNotInstalled) && os.Getenv("CI") == "" {
			t.Skipf("!!! SKIPPED: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	url, err := c.NewDatabase(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return url, c
}

// replicaBrain answers "slow" with ten pieces a tenth of a second apart,
// "hang" never (for runs lost with their replica), else as Echo.
func replicaBrain(turn providertest.Turn) providertest.Reply {
	switch turn.LastUser() {
	case "slow":
		return providertest.Reply{Chunks: []string{"one ", "two ", "three ", "four ", "five ", "six ", "seven ", "eight ", "nine ", "ten"}, Delay: 100 * time.Millisecond}
	case "hang":
		return providertest.Reply{Chunks: strings.Split(strings.Repeat("x", 60), ""), Delay: time.Second}
	}
	return providertest.Echo(turn)
}

// replicas starts n nb serve processes sharing the database at store (a
// proxy's address for some, see cut) over the same cartridges, with the
// server token; it returns their URLs.
func replicas(t *testing.T, stores []string) []string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts nb serve")
	}
	// Not an httptest.Server: its Close waits for the answers that hang.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fake := &http.Server{Handler: openaitest.New(replicaBrain)}
	go fake.Serve(ln) //nolint:errcheck // ends with Close
	t.Cleanup(func() { fake.Close() })
	dir := t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("echo.yml", "meta: {name: Echo}\nprovider: "+providerSection["openai"]+"\n")
	write("weather.yml", `meta: {name: Weather}
safety: {tools: {confirmable: false}}
tools:
  - name: get-weather
    description: Gets the weather of a city.
    parameters: {type: object, properties: {city: {type: string}}, required: [city]}
    lua: 'return "sunny in " .. parameters.city'
provider: `+providerSection["openai"]+"\n")
	env := []string{"OPENAI_API_ADDRESS=http://" + ln.Addr().String(), "OPENAI_API_KEY=k", "NB_SERVE_TOKEN=" + token}
	urls := make([]string, len(stores))
	var wg sync.WaitGroup
	for i, store := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var cmd *exec.Cmd
			cmd, urls[i], _ = nbServe(t, dir, env, "--watch", "0", "--store", store, "--replica-id", fmt.Sprintf("r%d", i+1), "--replica-timeout", "2s")
			serving.Store(urls[i], cmd.Process)
		}()
	}
	wg.Wait()
	return urls
}

// request sends method url with the token (and body, as JSON) and returns
// the answer.
func request(t *testing.T, method, url, body string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// A Nano Bots API stream started on one replica is read to the end from
// another, by polling and as server-sent events; a Responses
// continuation and a client tool round continue on another replica; an
// agent run's end is told to a client that reconnects elsewhere, and a
// run whose replica died is reported lost.
func TestServeReplicas(t *testing.T) {
	store, _ := startPostgres(t)
	urls := replicas(t, []string{store, store, store})
	a, b, c := urls[0], urls[1], urls[2]
	const whole = "one two three four five six seven eight nine ten\n" // eval mode ends with a new line

	t.Run("stream polled on another replica", func(t *testing.T) {
		_, body := request(t, "POST", a+"/cartridges/stream", `{"cartridge":"echo","input":"slow"}`)
		var s struct{ ID, State, Output string }
		if err := json.Unmarshal([]byte(body), &s); err != nil || s.ID == "" {
			t.Fatalf("create: %s", body)
		}
		polls := 0
		for deadline := time.Now().Add(15 * time.Second); s.State != "finished"; polls++ {
			if time.Now().After(deadline) {
				t.Fatalf("the stream did not finish on the other replica: %+v", s)
			}
			prev := s.Output
			_, body := request(t, "GET", b+"/cartridges/stream/"+s.ID, "")
			if err := json.Unmarshal([]byte(body), &s); err != nil || s.State == "unknown" {
				t.Fatalf("poll on b: %s", body)
			}
			if !strings.HasPrefix(s.Output, prev) {
				t.Fatalf("the output did not only grow: %q then %q", prev, s.Output)
			}
		}
		if s.Output != whole || polls < 3 {
			t.Errorf("read on b after %d polls: %q", polls, s.Output)
		}
		// Another replica, as server-sent events from the start.
		resp, events := request(t, "GET", c+"/cartridges/stream/"+s.ID, "", "Accept", "text/event-stream")
		if resp.StatusCode != 200 || !strings.Contains(events, "event: finished\nid: 49\n") || !strings.Contains(events, `"output":"one two three four five six seven eight nine ten\n"`) {
			t.Errorf("events on c: %d %s", resp.StatusCode, events)
		}
	})

	t.Run("stream followed as events while it runs", func(t *testing.T) {
		_, body := request(t, "POST", a+"/cartridges/stream", `{"cartridge":"echo","input":"slow"}`)
		var s struct{ ID string }
		json.Unmarshal([]byte(body), &s) //nolint:errcheck // checked next
		req, _ := http.NewRequest("GET", c+"/cartridges/stream/"+s.ID, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out strings.Builder
		pieces := 0
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if data, ok := strings.CutPrefix(line, "data: "); ok && !strings.Contains(data, `"state"`) {
				var piece struct{ Output string }
				json.Unmarshal([]byte(data), &piece) //nolint:errcheck // compared below
				out.WriteString(piece.Output)
				pieces++
			}
			if line == "event: finished" {
				break
			}
		}
		if out.String() != whole || pieces < 3 {
			t.Errorf("followed in %d pieces: %q", pieces, out.String())
		}
	})

	t.Run("another owner does not see a stream", func(t *testing.T) {
		_, body := request(t, "POST", a+"/cartridges/stream", `{"cartridge":"echo","input":"hi"}`)
		var s struct{ ID string }
		json.Unmarshal([]byte(body), &s) //nolint:errcheck // checked next
		_, body = request(t, "GET", b+"/cartridges/stream/"+s.ID+"x", "")
		if !strings.Contains(body, `"state":"unknown"`) {
			t.Errorf("an unknown id: %s", body)
		}
	})

	t.Run("responses continuation", func(t *testing.T) {
		resp, body := request(t, "POST", a+"/v1/responses", `{"model":"echo","input":"first"}`)
		id := between(body, `"id":"`, `"`)
		if resp.StatusCode != 200 || !strings.HasPrefix(id, "resp_") {
			t.Fatalf("first: %d %s", resp.StatusCode, body)
		}
		resp, body = request(t, "POST", b+"/v1/responses", fmt.Sprintf(`{"model":"echo","input":"second","previous_response_id":%q}`, id))
		if resp.StatusCode != 200 || !strings.Contains(body, "echo: second") {
			t.Fatalf("continued on b: %d %s", resp.StatusCode, body)
		}
		if resp, body := request(t, "GET", c+"/v1/responses/"+id, ""); resp.StatusCode != 200 || !strings.Contains(body, "echo: first") {
			t.Errorf("get on c: %d %s", resp.StatusCode, body)
		}
		if resp, _ := request(t, "DELETE", c+"/v1/responses/"+id, ""); resp.StatusCode != 200 {
			t.Errorf("delete on c: %d", resp.StatusCode)
		}
		if resp, body := request(t, "POST", a+"/v1/responses", fmt.Sprintf(`{"model":"echo","input":"third","previous_response_id":%q}`, id)); resp.StatusCode != 400 || !strings.Contains(body, "previous_response_not_found") {
			t.Errorf("after delete, on a: %d %s", resp.StatusCode, body)
		}
	})

	t.Run("client tool round", func(t *testing.T) {
		tools := `"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}]`
		ask := `{"role":"user","content":"call get-weather {\"city\":\"Paris\"}; lookup {\"q\":\"x\"}"}`
		resp, body := request(t, "POST", a+"/v1/chat/completions", fmt.Sprintf(`{"model":"weather",%s,"messages":[%s]}`, tools, ask))
		if resp.StatusCode != 200 || !strings.Contains(body, `"finish_reason":"tool_calls"`) {
			t.Fatalf("on a: %d %s", resp.StatusCode, body)
		}
		id := between(body, `"tool_calls":[{"id":"`, `"`)
		resp, body = request(t, "POST", b+"/v1/chat/completions", fmt.Sprintf(`{"model":"weather",%s,"messages":[%s,{"role":"assistant","tool_calls":[{"id":%q,"type":"function","function":{"name":"lookup","arguments":"{\"q\":\"x\"}"}}]},{"role":"tool","tool_call_id":%q,"content":"found"}]}`, tools, ask, id, id))
		if want := `"content":"tool get-weather said: sunny in Paris; tool lookup said: found"`; resp.StatusCode != 200 || resp.Header.Get("X-Nb-Tool-Rounds-Lost") != "" || !strings.Contains(body, want) {
			t.Errorf("results sent to b: %d lost=%q %s", resp.StatusCode, resp.Header.Get("X-Nb-Tool-Rounds-Lost"), body)
		}
	})

	t.Run("agent run reconnect", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		ca, _ := agentproto.NewClient(a, token)
		conn, err := ca.Start(ctx, "Echo", &agentproto.Frame{Input: "hello"})
		if err != nil {
			t.Fatal(err)
		}
		var runID string
		for {
			f, err := conn.Read(ctx)
			if err != nil {
				t.Fatal(err)
			}
			runID = f.RunID
			if f.Terminal() {
				if f.Type != agentproto.TypeFinalResult {
					t.Fatalf("the run failed: %+v", f)
				}
				break
			}
		}
		cb, _ := agentproto.NewClient(b, token)
		rc, err := cb.Dial(ctx, cb.RunURL("Echo")+"?run_id="+runID)
		if err != nil {
			t.Fatal(err)
		}
		f, err := rc.Read(ctx)
		if err != nil || f.Type != agentproto.TypeFinalResult || f.RunID != runID || f.Seq != 1 || f.Result != "echo: hello" {
			t.Errorf("reconnected on b: %+v %v", f, err)
		}
		rc, err = cb.Dial(ctx, cb.RunURL("Echo")+"?run_id=r_000000000000")
		if err != nil {
			t.Fatal(err)
		}
		if f, err := rc.Read(ctx); err != nil || f.Code != agentproto.CodeUnknownRun {
			t.Errorf("an unknown run: %+v %v", f, err)
		}
	})
}

// A run whose replica dies is reported lost to a client that reconnects
// to another; a stream it ran is failed, saying so.
func TestServeReplicaLost(t *testing.T) {
	store, _ := startPostgres(t)
	urls := replicas(t, []string{store, store})
	a, b := urls[0], urls[1]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ca, _ := agentproto.NewClient(a, token)
	conn, err := ca.Start(ctx, "Echo", &agentproto.Frame{Input: "hang"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := conn.Read(ctx)
	if err != nil || f.Type != agentproto.TypeRunStarted {
		t.Fatalf("run_started: %+v %v", f, err)
	}
	_, body := request(t, "POST", a+"/cartridges/stream", `{"cartridge":"echo","input":"hang"}`)
	streamID := between(body, `"id":"`, `"`)
	cb, _ := agentproto.NewClient(b, token)
	// While a runs, a reconnection is told the run is in progress there.
	rc, err := cb.Dial(ctx, cb.RunURL("Echo")+"?run_id="+f.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if g, err := rc.Read(ctx); err != nil || g.Code != agentproto.CodeRunInProgress || !strings.Contains(g.Message, "replica r1") {
		t.Errorf("while it runs: %+v %v", g, err)
	}
	// kill -9 replica a.
	killReplica(t, a)
	deadline := time.Now().Add(15 * time.Second)
	for {
		rc, err := cb.Dial(ctx, cb.RunURL("Echo")+"?run_id="+f.RunID)
		if err != nil {
			t.Fatal(err)
		}
		g, err := rc.Read(ctx)
		if err == nil && g.Code == agentproto.CodeRunLost {
			if !strings.Contains(g.Message, "lost with its replica r1") {
				t.Errorf("lost: %s", g.Message)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never reported lost: %+v %v", g, err)
		}
	}
	resp, body := request(t, "GET", b+"/cartridges/stream/"+streamID, "")
	if resp.StatusCode != 500 || !strings.Contains(body, `"state":"failed"`) || !strings.Contains(body, "the replica that ran this stream (r1) stopped before it finished") {
		t.Errorf("the stream of the dead replica: %d %s", resp.StatusCode, body)
	}
}

// serving maps each replica's URL to its process, for killReplica.
var serving sync.Map

func killReplica(t *testing.T, url string) {
	t.Helper()
	p, ok := serving.Load(url)
	if !ok {
		t.Fatalf("no process for %s", url)
	}
	if err := p.(*os.Process).Kill(); err != nil {
		t.Fatal(err)
	}
}

// A replica cut off from PostgreSQL (its connections closed, and new
// ones refused) stops taking work, and says why on /ready, instead of
// answering from what its memory holds; it takes work again once the
// database answers. The other replica goes on.
func TestServeReplicaPartition(t *testing.T) {
	store, cluster := startPostgres(t)
	proxy := newCutProxy(t, store)
	urls := replicas(t, []string{store, proxy.url})
	a, p := urls[0], urls[1]
	// A stream of a, read once on p: p holds a copy in its memory.
	_, body := request(t, "POST", a+"/cartridges/stream", `{"cartridge":"echo","input":"slow"}`)
	id := between(body, `"id":"`, `"`)
	if _, body := request(t, "GET", p+"/cartridges/stream/"+id, ""); !strings.Contains(body, `"state":"pending"`) {
		t.Fatalf("poll on p: %s", body)
	}
	proxy.cut(true)
	if err := cluster.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'nb serve r2'`); err != nil {
		t.Fatal(err)
	}
	until(t, "p says it is not ready", func() bool {
		resp, body := request(t, "GET", p+"/ready", "")
		return resp.StatusCode == 503 && strings.Contains(body, "the shared store") && strings.Contains(body, "is unreachable")
	})
	for _, try := range []struct{ method, path, body string }{
		{"GET", "/cartridges/stream/" + id, ""},
		{"POST", "/cartridges/stream", `{"cartridge":"echo","input":"hi"}`},
		{"POST", "/v1/chat/completions", `{"model":"echo","messages":[{"role":"user","content":"hi"}]}`},
	} {
		resp, body := request(t, try.method, p+try.path, try.body)
		if resp.StatusCode != 503 || !strings.Contains(body, "this replica takes no work: the shared store") || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s on p: %d %s", try.method, try.path, resp.StatusCode, body)
		}
	}
	if resp, body := request(t, "GET", a+"/cartridges/stream/"+id, ""); resp.StatusCode != 200 || strings.Contains(body, `"state":"unknown"`) {
		t.Errorf("a goes on: %d %s", resp.StatusCode, body)
	}
	proxy.cut(false)
	until(t, "p is ready again", func() bool {
		resp, _ := request(t, "GET", p+"/ready", "")
		return resp.StatusCode == 200
	})
	if resp, body := request(t, "GET", p+"/cartridges/stream/"+id, ""); resp.StatusCode != 200 || strings.Contains(body, `"state":"unknown"`) {
		t.Errorf("p after the partition: %d %s", resp.StatusCode, body)
	}
}

// cutProxy forwards TCP connections to PostgreSQL until it is cut: then
// it closes them all and refuses new ones, as a network partition would.
type cutProxy struct {
	url string

	mu     sync.Mutex
	cutOff bool
	conns  map[net.Conn]bool
}

func newCutProxy(t *testing.T, store string) *cutProxy {
	t.Helper()
	target := between(store, "@", "/")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	p := &cutProxy{url: strings.Replace(store, target, ln.Addr().String(), 1), conns: map[net.Conn]bool{}}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cutOff {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.mu.Unlock()
			go p.forward(c, target)
		}
	}()
	return p
}

func (p *cutProxy) forward(c net.Conn, target string) {
	up, err := net.Dial("tcp", target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	go func() { io.Copy(up, c); up.Close(); c.Close() }() //nolint:errcheck // ends with either side
	io.Copy(c, up)                                        //nolint:errcheck // ends with either side
	c.Close()
	up.Close()
}

// cut closes every connection and refuses new ones (on), or lets them
// through again (off).
func (p *cutProxy) cut(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutOff = on
	if on {
		for c := range p.conns {
			c.Close()
		}
		p.conns = map[net.Conn]bool{}
	}
}
