package agentsrv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/agentproto"
	"github.com/nbots/nb/agents"
	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"

	_ "github.com/nbots/nb/provider/openai"
)

// fakeOpenAI serves the in-process OpenAI fake with brain.
func fakeOpenAI(t *testing.T, brain providertest.Brain) (string, *providertest.Recorder) {
	t.Helper()
	s := openaitest.New(brain)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv.URL, s.Recorder
}

// newAgent builds the agent of a cartridge written in dir (body after
// the provider section).
func newAgent(t *testing.T, dir, providerURL, name, body string) *agents.Agent {
	t.Helper()
	if !strings.Contains(body, "safety:") {
		body += "safety: {tools: {confirmable: false}, functions: {sandboxed: false}}\n"
	}
	src := fmt.Sprintf("meta: {name: %s, description: the %s agent}\nprovider:\n  id: openai\n  credentials: {address: %s, access-token: k}\n  settings: {model: gpt-4o, temperature: 1}\n%s", name, name, providerURL, body)
	path := filepath.Join(dir, name+".yml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := cartridge.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Robopages find their programs on the host's PATH.
	b, err := bot.New(context.Background(), c, bot.Host{Environ: []string{"PATH=" + os.Getenv("PATH")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	a, err := agents.FromCartridge(b)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// serve runs a protocol server for the agents; wrap, when set, wraps
// its handler (authentication).
func serve(t *testing.T, h *Handler, list ...*agents.Agent) (*httptest.Server, *agents.Runtime) {
	t.Helper()
	set, err := agents.NewSet(list...)
	if err != nil {
		t.Fatal(err)
	}
	rt := agents.New(set)
	if h == nil {
		h = &Handler{}
	}
	h.Runtime = rt
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, rt
}

// client is a test's side of a run: every frame it reads is checked
// against the protocol's schemas and its seq.
type client struct {
	t     *testing.T
	conn  *agentproto.Conn
	seq   int64
	runID string
	all   []*agentproto.Frame
}

func start(t *testing.T, serverURL, name string, run *agentproto.Frame) *client {
	t.Helper()
	c, err := agentproto.NewClient(serverURL, "")
	if err != nil {
		t.Fatal(err)
	}
	return startWith(t, c, name, run)
}

func startWith(t *testing.T, c *agentproto.Client, name string, run *agentproto.Frame) *client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := c.Start(ctx, name, run)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Abort)
	return &client{t: t, conn: conn}
}

var errClosed = errors.New("closed")

// next reads the next frame.
func (c *client) next() *agentproto.Frame {
	c.t.Helper()
	f, err := c.read(10 * time.Second)
	if err != nil {
		c.t.Fatalf("reading a frame: %v (frames so far: %s)", err, c.dump())
	}
	return f
}

func (c *client) read(d time.Duration) (*agentproto.Frame, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	data, err := c.conn.ReadRaw(ctx)
	if errors.Is(err, io.EOF) {
		return nil, errClosed
	}
	if err != nil {
		return nil, err
	}
	if err := agentproto.ValidateFrame(data); err != nil {
		c.t.Errorf("frame %s does not follow its schema: %v", data, err)
	}
	f, err := agentproto.Decode(data)
	if err != nil {
		c.t.Fatal(err)
	}
	if f.Seq != c.seq+1 {
		c.t.Errorf("seq %d after %d: %s", f.Seq, c.seq, data)
	}
	c.seq = f.Seq
	if f.RunID != "" {
		if c.runID == "" {
			c.runID = f.RunID
		} else if f.RunID != c.runID {
			c.t.Errorf("run_id %s, then %s", c.runID, f.RunID)
		}
	}
	c.all = append(c.all, f)
	return f, nil
}

// finish reads frames until the terminal one, passing each to handle
// (which may answer); it checks that the connection closes after it.
func (c *client) finish(handle func(*agentproto.Frame)) *agentproto.Frame {
	c.t.Helper()
	for {
		f := c.next()
		if handle != nil {
			handle(f)
		}
		if f.Terminal() {
			if _, err := c.read(5 * time.Second); err != errClosed {
				c.t.Errorf("after the terminal frame: %v, want a normal close", err)
			}
			return f
		}
	}
}

func (c *client) send(f *agentproto.Frame) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.conn.Send(ctx, f); err != nil {
		c.t.Fatal(err)
	}
}

func (c *client) dump() string {
	var b strings.Builder
	for _, f := range c.all {
		data, _ := json.Marshal(f)
		b.Write(data)
		b.WriteByte('\n')
	}
	return b.String()
}

// types lists the frames' types, with minion ids.
func (c *client) types() string {
	var out []string
	for _, f := range c.all {
		s := f.Type
		if f.MinionID != "" {
			s += "@" + f.MinionID
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

// brains lets a test change the answers of a running fake.
type brainBox struct {
	mu sync.Mutex
	fn providertest.Brain
}

func (b *brainBox) brain(t providertest.Turn) providertest.Reply {
	b.mu.Lock()
	fn := b.fn
	b.mu.Unlock()
	return fn(t)
}

func openaitestDecode(body []byte) (providertest.Turn, error) { return openaitest.Decode(body) }
