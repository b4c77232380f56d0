package nanobots

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/provider/providertest"
)

// blocking is a provider that never answers: it reports when a request
// arrives and when its client (nb) gives up on it.
type blocking struct {
	arrived, cancelled chan struct{}
}

func newBlocking() *blocking {
	return &blocking{arrived: make(chan struct{}, 10), cancelled: make(chan struct{}, 10)}
}

func (b *blocking) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Read to the end: net/http notices a client leaving only then.
	io.Copy(io.Discard, r.Body) //nolint:errcheck // test
	b.arrived <- struct{}{}
	<-r.Context().Done()
	b.cancelled <- struct{}{}
}

func waitFor(t *testing.T, ch <-chan struct{}, what string, d time.Duration) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("timed out waiting: %s", what)
	}
}

// A client that goes away cancels its run: the provider request is
// abandoned at once.
func TestClientGoneCancelsRun(t *testing.T) {
	prov := newBlocking()
	f := newFixture(t, setup{files: cartridges, provider: prov})
	c := f.dial()
	body := `{"cartridge":"writer","state":"-","input":"hi"}`
	head := fmt.Sprintf("POST /cartridges HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	if _, err := c.conn.Write([]byte(head + body)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, prov.arrived, "the provider request", 5*time.Second)
	c.conn.Close()
	waitFor(t, prov.cancelled, "the provider request to be cancelled after the client left", 5*time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for f.srv.Active() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := f.srv.Active(); n != 0 {
		t.Fatalf("%d runs still counted", n)
	}
}

// ...and the processes its tools started: a robopage's sleep is killed.
func TestClientGoneKillsToolProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("needs /proc")
	}
	const secs = "37.4185"
	f := newFixture(t, setup{files: map[string]string{
		"napper.yml": cart("name: Napper", "safety: {tools: {confirmable: false}}", "robopages: [{path: pages/nap.yml}]"),
		"pages/nap.yml": `description: Naps.
functions:
  nap:
    description: Sleeps.
    parameters:
      secs: {type: string, description: How long.}
    cmdline: [sleep, "${secs}"]
`,
	}})
	c := f.dial()
	body := `{"cartridge":"napper","input":"call nap {\"secs\":\"` + secs + `\"}"}`
	head := fmt.Sprintf("POST /cartridges HTTP/1.1\r\nHost: localhost\r\nContent-Length: %d\r\n\r\n", len(body))
	if _, err := c.conn.Write([]byte(head + body)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !sleeping(secs) {
		if time.Now().After(deadline) {
			t.Fatalf("the tool's process never started; log:\n%s", f.log)
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.conn.Close()
	deadline = time.Now().Add(10 * time.Second)
	for sleeping(secs) {
		if time.Now().After(deadline) {
			t.Fatal("the tool's process outlived its client")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sleeping reports whether a process `sleep secs` is running.
func sleeping(secs string) bool {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	want := []byte("sleep\x00" + secs + "\x00")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && bytes.HasSuffix(b, want) && (bytes.HasPrefix(b, []byte("sleep\x00")) || bytes.Contains(b, []byte("/sleep\x00"))) {
			return true
		}
	}
	return false
}

// A stream nobody polls any more (the plugins' Stop only stops polling)
// is cancelled.
func TestAbandonedStreamIsCancelled(t *testing.T) {
	prov := newBlocking()
	f := newFixture(t, setup{files: cartridges, provider: prov, api: Options{AbandonAfter: 300 * time.Millisecond}})
	_, body := f.do("POST", "/cartridges/stream", `{"cartridge":"writer","input":"hi"}`)
	id := decodeJSON(t, body)["id"].(string)
	waitFor(t, prov.arrived, "the provider request", 5*time.Second)
	// Polled: kept.
	for range 5 {
		f.do("GET", "/cartridges/stream/"+id, "")
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case <-prov.cancelled:
		t.Fatal("a polled stream was cancelled")
	default:
	}
	// No more polls: cancelled.
	waitFor(t, prov.cancelled, "the abandoned stream to be cancelled", 5*time.Second)
	resp, body := f.do("GET", "/cartridges/stream/"+id, "")
	m := decodeJSON(t, body)
	if resp.StatusCode != 500 || m["state"] != "failed" || !strings.Contains(fmt.Sprint(m["error"]), "the client went away") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

// Stopping the server (SIGTERM) while a stream runs: its client keeps
// polling until it finishes, new runs are refused, then the server stops.
func TestShutdownDuringStream(t *testing.T) {
	f := newFixture(t, setup{files: cartridges, listen: true, brain: func(providertest.Turn) providertest.Reply {
		return providertest.Reply{Chunks: []string{"a", "b", "c", "d"}, Delay: 100 * time.Millisecond}
	}, server: func(o *serverOptions) { o.Limits.Grace = 10 * time.Second }})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.url, f.addr = "http://"+ln.Addr().String(), ln.Addr().String()
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- f.srv.Serve(ctx, ln) }()
	_, body := f.do("POST", "/cartridges/stream", `{"cartridge":"writer","input":"hi"}`)
	id := decodeJSON(t, body)["id"].(string)
	stop()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if resp, _ := f.do("GET", "/healthz", ""); resp.StatusCode == http.StatusServiceUnavailable {
			break // stopping
		}
		if time.Now().After(deadline) {
			t.Fatal("the server never said it was stopping")
		}
	}
	if resp, body := f.do("POST", "/cartridges", `{"cartridge":"writer","input":"late"}`); resp.StatusCode != 503 {
		t.Errorf("a new run while stopping: %d %s", resp.StatusCode, body)
	}
	final, _ := f.pollUntilDone(id)
	if final["output"] != "abcd\n" {
		t.Fatalf("output %q", final["output"])
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
}

// 200 streams at once, to 20 cartridges, each polled to its end by its
// own client (run with -race).
func TestConcurrentStreams(t *testing.T) {
	files := map[string]string{}
	for i := range 20 {
		files[fmt.Sprintf("c%02d.yml", i)] = cart(fmt.Sprintf("name: C%02d", i))
	}
	f := newFixture(t, setup{files: files, brain: func(turn providertest.Turn) providertest.Reply {
		r := providertest.Echo(turn)
		r.Delay = time.Millisecond
		return r
	}, server: func(o *serverOptions) { o.Limits.MaxRuns = 250 }})
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			input := fmt.Sprintf("message %d", i)
			req := fmt.Sprintf(`{"cartridge":"c%02d","state":"-","input":%q}`, i%20, input)
			resp, err := http.Post(f.url+"/cartridges/stream", "application/json", strings.NewReader(req))
			if err != nil {
				errs <- err
				return
			}
			var created map[string]any
			err = jsonDecode(resp, &created)
			if err != nil || resp.StatusCode != 200 {
				errs <- fmt.Errorf("%d: %d %v", i, resp.StatusCode, err)
				return
			}
			id, _ := created["id"].(string)
			prev := ""
			for {
				resp, err := http.Get(f.url + "/cartridges/stream/" + id)
				if err != nil {
					errs <- err
					return
				}
				var m map[string]any
				if err := jsonDecode(resp, &m); err != nil {
					errs <- err
					return
				}
				out, _ := m["output"].(string)
				if !strings.HasPrefix(out, prev) {
					errs <- fmt.Errorf("%d: output rewritten: %q then %q", i, prev, out)
					return
				}
				prev = out
				if m["state"] == "finished" {
					if want := "echo: " + input + "\n"; out != want {
						errs <- fmt.Errorf("%d: output %q, want %q", i, out, want)
					}
					return
				}
				if m["state"] != "pending" {
					errs <- fmt.Errorf("%d: %v", i, m)
					return
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// A run is uncounted just after its stream says finished: wait for it.
	deadline := time.Now().Add(5 * time.Second)
	for f.srv.Active() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := f.srv.Active(); n != 0 {
		t.Errorf("%d runs still counted", n)
	}
}

func jsonDecode(resp *http.Response, v any) error {
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		return err
	}
	return jsonUnmarshal(b.String(), v)
}
