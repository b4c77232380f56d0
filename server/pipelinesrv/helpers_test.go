package pipelinesrv

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/nbots/nb/pipeline/runstore"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/bot"
	_ "github.com/nbots/nb/provider/openai" // the fake speaks OpenAI's API
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/server"
)

// review is §2.13's Review example, verbatim (package pipeline's copy).
var review = func() string {
	data, err := os.ReadFile(filepath.Join("..", "..", "pipeline", "testdata", "review.dot"))
	if err != nil {
		panic(err)
	}
	return string(data)
}()

// fixture is nb serve's server with the pipeline routes, on a folder
// whose cartridge "coder" talks to the OpenAI fake.
type fixture struct {
	t    *testing.T
	dir  string
	runs string
	url  string
	srv  *server.Server
	h    *Handler
	fake *openaitest.Server
	stop context.CancelFunc
	done chan error
	tok  string
}

type fixtureOpts struct {
	tokens []*server.Token
	grace  time.Duration
	files  map[string]string
	// dir and runs, when set, are the served folder and the run folders
	// (another server's: a restart).
	dir, runs string
	// store, when set, keeps the runs (a Stored).
	store runstore.Store
}

func newFixture(t *testing.T, o fixtureOpts) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: o.dir, runs: o.runs, fake: openaitest.New(providertest.Echo), done: make(chan error, 1)}
	if f.dir == "" {
		f.dir = t.TempDir()
	}
	if f.runs == "" {
		f.runs = t.TempDir()
	}
	fake := httptest.NewServer(f.fake)
	t.Cleanup(fake.Close)
	files := map[string]string{"coder.yml": "meta: {name: coder, author: Tests, version: 1.0.0}\n" +
		"provider: {id: openai, credentials: {address: ENV/OPENAI_API_ADDRESS, access-token: ENV/OPENAI_API_KEY}, settings: {model: m}}\n" +
		"safety: {tools: {confirmable: false}}\n"}
	for k, v := range o.files {
		files[k] = v
	}
	for name, src := range files {
		p := filepath.Join(f.dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	home := t.TempDir()
	host := bot.Host{Environ: []string{"OPENAI_API_ADDRESS=" + fake.URL, "OPENAI_API_KEY=sk-server-secret", "HOME=" + home, "PATH=" + os.Getenv("PATH")}}
	grace := o.grace
	if grace == 0 {
		grace = 200 * time.Millisecond
	}
	srv, err := server.New(context.Background(), server.Options{Dirs: []string{f.dir}, Host: host, Tokens: o.tokens, WatchInterval: -1,
		Limits: server.Limits{Grace: grace}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	var runs Runs
	if o.store != nil {
		runs = &Stored{Store: o.store, Dir: f.runs}
	}
	f.h = Mount(srv, Options{Runs: runs, RunsDir: f.runs, Host: host, WorkDir: t.TempDir(), Heartbeat: 50 * time.Millisecond})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.url = "http://" + ln.Addr().String()
	ctx, stop := context.WithCancel(context.Background())
	f.stop = stop
	go func() { f.done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		f.shutdown()
		f.h.Close()
	})
	return f
}

// shutdown stops the server as SIGTERM does and waits for Serve.
func (f *fixture) shutdown() {
	f.stop()
	select {
	case <-f.done:
	case <-time.After(30 * time.Second):
		f.t.Error("the server did not stop")
	}
	f.done <- nil // later calls return at once
}

// do sends a request and returns the status and body.
func (f *fixture) do(method, path string, body any, hdr ...string) (int, []byte) {
	f.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			f.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, f.url+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	if f.tok != "" {
		req.Header.Set("Authorization", "Bearer "+f.tok)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp.StatusCode, data
}

// json sends a request, wants the status, and decodes the answer.
func (f *fixture) json(method, path string, body any, want int, out any) {
	f.t.Helper()
	status, data := f.do(method, path, body)
	if status != want {
		f.t.Fatalf("%s %s: %d %s; want %d", method, path, status, data, want)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			f.t.Fatalf("%s %s: %v: %s", method, path, err, data)
		}
	}
}

// start posts a pipeline and returns its id.
func (f *fixture) start(body map[string]any) string {
	f.t.Helper()
	var out struct{ ID string }
	f.json("POST", "/pipelines", body, http.StatusCreated, &out)
	if out.ID == "" {
		f.t.Fatal("no id")
	}
	return out.ID
}

func (f *fixture) info(id string) Info {
	f.t.Helper()
	var info Info
	f.json("GET", "/pipelines/"+id, nil, http.StatusOK, &info)
	return info
}

// question waits for the run's next question (one whose id is not in
// seen) and returns it.
func (f *fixture) question(id string, seen ...string) questionJSON {
	f.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var qs struct{ Questions []questionJSON }
		f.json("GET", "/pipelines/"+id+"/questions", nil, http.StatusOK, &qs)
		for _, q := range qs.Questions {
			if !contains(seen, q.ID) {
				return q
			}
		}
		if Ended(f.info(id).Status) {
			f.t.Fatalf("run %s ended without a question: %+v", id, f.info(id))
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.t.Fatal("no question came")
	return questionJSON{}
}

// wait waits for the run to end and returns its state.
func (f *fixture) wait(id string) Info {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if info := f.info(id); Ended(info.Status) {
			return info
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.t.Fatalf("run %s did not end: %+v", id, f.info(id))
	return Info{}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// sseEvent is one server-sent event as a client reads it.
type sseEvent struct {
	ID    int64
	Event string
	Data  map[string]any
}

// stream reads the run's event stream (from Last-Event-ID when after >
// 0) until the server ends it; it returns the status and the events.
func (f *fixture) stream(id string, after int64) (int, []sseEvent) {
	f.t.Helper()
	status, evs, err := f.rawStream(id, after)
	if err != nil {
		f.t.Fatal(err)
	}
	return status, evs
}

func (f *fixture) rawStream(id string, after int64) (int, []sseEvent, error) {
	req, _ := http.NewRequest("GET", f.url+"/pipelines/"+id+"/events", nil)
	if after > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(after, 10))
	}
	if f.tok != "" {
		req.Header.Set("Authorization", "Bearer "+f.tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil, nil
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		return 0, nil, fmt.Errorf("Content-Type %q", ct)
	}
	evs, err := readSSE(resp.Body)
	return resp.StatusCode, evs, err
}

// readSSE parses an event stream as the HTML specification says:
// fields up to a blank line, comments skipped.
func readSSE(r io.Reader) ([]sseEvent, error) {
	var out []sseEvent
	var cur sseEvent
	var data []string
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if len(data) > 0 {
				if err := json.Unmarshal([]byte(strings.Join(data, "\n")), &cur.Data); err != nil {
					return out, fmt.Errorf("event %d: %v", cur.ID, err)
				}
				out = append(out, cur)
			}
			cur, data = sseEvent{}, nil
		case strings.HasPrefix(line, ":"):
		default:
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimPrefix(v, " ")
			switch k {
			case "id":
				cur.ID, _ = strconv.ParseInt(v, 10, 64)
			case "event":
				cur.Event = v
			case "data":
				data = append(data, v)
			}
		}
	}
	return out, sc.Err()
}

func count(evs []sseEvent, kind string) int {
	n := 0
	for _, e := range evs {
		if e.Event == kind {
			n++
		}
	}
	return n
}

// following collects a run's stream in the background.
type following struct {
	mu   sync.Mutex
	evs  []sseEvent
	err  error
	done chan struct{}
}

func (f *fixture) follow(id string) *following {
	fl := &following{done: make(chan struct{})}
	go func() {
		defer close(fl.done)
		_, evs, err := f.rawStream(id, 0)
		fl.mu.Lock()
		fl.evs, fl.err = evs, err
		fl.mu.Unlock()
	}()
	return fl
}

func (fl *following) wait(t *testing.T) []sseEvent {
	t.Helper()
	select {
	case <-fl.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the event stream did not end")
	}
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if fl.err != nil {
		t.Fatal(fl.err)
	}
	return fl.evs
}
