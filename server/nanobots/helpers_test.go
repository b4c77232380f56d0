package nanobots

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/internal/testbuf"
	_ "github.com/nbots/nb/provider/openai"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/server"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// fixture is nb serve in-process: a folder of cartridges on the OpenAI
// fake, the Nano Bots API, and a log kept for inspection.
type fixture struct {
	t        *testing.T
	dir      string
	srv      *server.Server
	api      *API
	url      string
	addr     string // host:port, for raw connections
	fake     *openaitest.Server
	provider *httptest.Server
	log      *testbuf.Buffer
}

// cart is a cartridge on the fake provider.
func cart(meta string, extra ...string) string {
	return "meta: {" + meta + "}\n" +
		"provider: {id: openai, credentials: {address: ENV/OPENAI_API_ADDRESS, access-token: ENV/OPENAI_API_KEY}, settings: {model: m}}\n" +
		strings.Join(extra, "\n") + "\n"
}

type setup struct {
	files    map[string]string
	brain    providertest.Brain
	provider http.Handler // instead of the fake
	server   func(*server.Options)
	api      Options
	listen   bool // serve on a real listener (for Serve and shutdown)
}

func newFixture(t *testing.T, s setup) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: t.TempDir(), log: &testbuf.Buffer{}}
	for name, src := range s.files {
		p := filepath.Join(f.dir, filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755) //nolint:errcheck // WriteFile reports it
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if s.brain == nil {
		s.brain = providertest.Echo
	}
	f.fake = openaitest.New(s.brain)
	var h http.Handler = f.fake
	if s.provider != nil {
		h = s.provider
	}
	f.provider = httptest.NewServer(h)
	t.Cleanup(f.provider.Close)
	home := t.TempDir()
	opts := server.Options{
		Dirs:             []string{f.dir},
		Host:             bot.Host{Environ: []string{"OPENAI_API_ADDRESS=" + f.provider.URL, "OPENAI_API_KEY=sk-server-secret", "HOME=" + home, "PATH=" + os.Getenv("PATH")}},
		WatchInterval:    -1,
		ClientCartridges: true,
		ClientHosts:      []string{"127.0.0.1"}, // the fake providers
		Log:              slog.New(slog.NewTextHandler(f.log, &slog.HandlerOptions{Level: slog.LevelInfo})),
	}
	if s.server != nil {
		s.server(&opts)
	}
	srv, err := server.New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	s.api.Version, s.api.Specification = "0.1.0", "3.2.0"
	f.api = New(srv, s.api)
	t.Cleanup(f.api.Close)
	t.Cleanup(func() { srv.Close() })
	if !s.listen {
		hs := httptest.NewServer(srv.Handler())
		t.Cleanup(hs.Close)
		f.url = hs.URL
		f.addr = strings.TrimPrefix(hs.URL, "http://")
	}
	return f
}

// do sends a request and returns the answer and its body.
func (f *fixture) do(method, path, body string, header ...string) (*http.Response, string) {
	f.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, f.url+path, r)
	if err != nil {
		f.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return resp, string(b)
}

// pollUntilDone polls a stream as the plugins do, checking that the output
// only grows, and returns the final answer and the number of polls.
func (f *fixture) pollUntilDone(id string) (map[string]any, int) {
	f.t.Helper()
	prev := ""
	for n := 1; ; n++ {
		resp, body := f.do("GET", "/cartridges/stream/"+id, "")
		var m map[string]any
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			f.t.Fatalf("poll %d: %v: %s", n, err, body)
		}
		out, _ := m["output"].(string)
		if !strings.HasPrefix(out, prev) {
			f.t.Fatalf("the output was rewritten: %q then %q", prev, out)
		}
		prev = out
		switch m["state"] {
		case "finished":
			if resp.StatusCode != 200 {
				f.t.Fatalf("finished with status %d", resp.StatusCode)
			}
			return m, n
		case "failed":
			if resp.StatusCode != 500 {
				f.t.Fatalf("failed with status %d", resp.StatusCode)
			}
			return m, n
		case "pending":
			if resp.StatusCode != 200 {
				f.t.Fatalf("pending with status %d", resp.StatusCode)
			}
		default:
			f.t.Fatalf("state %v: %s", m["state"], body)
		}
		if n > 100000 {
			f.t.Fatal("the stream never ended")
		}
	}
}

var (
	timeRE = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`)
	idRE   = regexp.MustCompile(`\b[0-9a-f]{32}\b`)
)

// normalize replaces what changes from run to run (times, stream ids,
// the temporary folder) with placeholders.
func (f *fixture) normalize(s string) string {
	s = timeRE.ReplaceAllString(s, "<time>")
	s = idRE.ReplaceAllString(s, "<id>")
	return strings.ReplaceAll(s, f.dir, "<dir>")
}

// golden compares got with testdata/name (rewritten with -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs:\n got: %s\nwant: %s", name, got, want)
	}
}

// rawConn sends requests written byte for byte, as a plugin's HTTP
// library does, and reads the answers.
type rawConn struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

func (f *fixture) dial() *rawConn {
	f.t.Helper()
	c, err := net.Dial("tcp", f.addr)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { c.Close() })
	return &rawConn{t: f.t, conn: c, r: bufio.NewReader(c)}
}

// send writes req (\n becomes \r\n in the head; the body is left alone)
// and reads the answer.
func (c *rawConn) send(head, body string, method string) (*http.Response, string) {
	c.t.Helper()
	c.conn.SetDeadline(time.Now().Add(10 * time.Second)) //nolint:errcheck // test
	if _, err := io.WriteString(c.conn, strings.ReplaceAll(head, "\n", "\r\n")+"\r\n"+body); err != nil {
		c.t.Fatal(err)
	}
	resp, err := http.ReadResponse(c.r, &http.Request{Method: method})
	if err != nil {
		c.t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	resp.Body.Close()
	return resp, string(b)
}

func decodeJSON(t *testing.T, body string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return m
}

type serverOptions = server.Options

func jsonUnmarshal(text string, v any) error { return json.Unmarshal([]byte(text), v) }
