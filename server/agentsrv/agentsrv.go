// Package agentsrv serves nb's agent protocol over HTTP: discovery
// (GET /agents, GET /agents/{name}, GET /tools) and runs over websockets
// (WS /agents/{name}/run), with the limits of a connection (frame size,
// frame rate, the wait for the first frame). The agents themselves run
// in an agents.Runtime; authentication, logging of requests and the
// other limits of a server belong to the server that mounts these
// routes. docs/agent-protocol.md is the protocol's specification.
package agentsrv

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/nbots/nb/agentproto"
	"github.com/nbots/nb/agents"
	"github.com/nbots/nb/eventlog"
	"github.com/nbots/nb/internal/bytesize"
	"github.com/nbots/nb/internal/httpjson"
)

// Defaults of a Handler.
const (
	DefaultRate       = 50  // frames per second from a client, on average
	DefaultBurst      = 200 // frames a client may send at once
	DefaultFirstFrame = 30 * time.Second
	writeTimeout      = 30 * time.Second
	// hardLimit is where the websocket library drops a connection: a
	// frame above MaxFrame but below it is read, discarded and answered
	// with an error frame.
	hardLimit = 64 << 20
)

// Handler serves the protocol for a Runtime.
type Handler struct {
	Runtime *agents.Runtime
	// MaxFrame bounds a client's frame (agentproto.DefaultMaxFrame when 0).
	MaxFrame int64
	// Rate and Burst limit the frames a connection sends (DefaultRate
	// and DefaultBurst when 0): frames over the limit are discarded and
	// answered with a rate_limited error frame.
	Rate  float64
	Burst int
	// FirstFrame bounds the wait for the run frame (DefaultFirstFrame
	// when 0).
	FirstFrame time.Duration
	// OriginPatterns are the origins of browser pages allowed to open
	// runs besides the server's own (see websocket.AcceptOptions).
	OriginPatterns []string
	// Log receives a line per run; nil logs nothing.
	Log *slog.Logger
	// MaxRuns bounds the runs in progress (none when 0): beyond it, an
	// upgrade is answered 503 with a JSON error.
	MaxRuns int
	// Context, when set, is the parent of every run: cancelling it (the
	// server shutting down) ends them with error cancelled. Runs outlive
	// the HTTP handler's call (it returns once the websocket is open), so
	// a server that waits for its handlers does not wait for them.
	Context context.Context
	// Admit, when set, is asked before a run's websocket is accepted:
	// it gives the run's context (a server's limits, deadline and
	// shutdown; it replaces Context) and the function to call when the
	// run ends. Its error is answered with WriteError, before the
	// upgrade.
	Admit func(r *http.Request) (context.Context, func(), error)
	// WriteError answers a refused request; nil writes
	// {"error": {"message"}} with the error's StatusCode() (500 without).
	WriteError func(w http.ResponseWriter, r *http.Request, err error)
	// EndUser, when set, names the end user of a request's runs.
	EndUser func(r *http.Request) string
	// Owner, when set, names who a request comes from (its token): the
	// end of a run is told only to a reconnection of the same owner.
	Owner func(r *http.Request) string
	// Shared, when set, is the store of the server's replicas: the runs'
	// records are kept there, so that a client reconnects to any replica
	// (see runs.go). Without it they are kept in memory.
	Shared eventlog.Shared
	// RunTTL is how long the end of a run is kept for a reconnecting
	// client (DefaultRunTTL when 0).
	RunTTL time.Duration

	runs        atomic.Int64
	recordsOnce sync.Once
	runRecords  *eventlog.Keeper[*runRecord]
}

// Runs is the number of runs in progress.
func (h *Handler) Runs() int { return int(h.runs.Load()) }

// Mux is where routes are registered: an *http.ServeMux, or nb serve's
// *server.Server (behind its tokens, logs and limits).
type Mux interface {
	HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request))
}

// Register adds the protocol's routes to mux.
func (h *Handler) Register(mux Mux) {
	mux.HandleFunc("GET /agents", h.listAgents)
	mux.HandleFunc("GET /agents/{name}", h.getAgent)
	mux.HandleFunc("GET /tools", h.listTools)
	mux.HandleFunc("GET /agents/{name}/run", h.serveRun)
}

func (h *Handler) listAgents(w http.ResponseWriter, r *http.Request) {
	list := h.Runtime.Catalog.Agents(r.Context())
	out := make([]agentproto.AgentRepr, len(list))
	for i, a := range list {
		out[i] = a.Repr
	}
	httpjson.Write(w, http.StatusOK, out)
}

func (h *Handler) getAgent(w http.ResponseWriter, r *http.Request) {
	a, err := h.Runtime.Catalog.Agent(r.Context(), r.PathValue("name"))
	if err != nil {
		httpjson.Write(w, http.StatusNotFound, map[string]any{"error": map[string]any{"code": agentproto.CodeUnknownAgent, "message": err.Error()}})
		return
	}
	httpjson.Write(w, http.StatusOK, a.Repr)
}

func (h *Handler) listTools(w http.ResponseWriter, r *http.Request) {
	out := h.Runtime.Tools(r.Context())
	if out == nil {
		out = []agentproto.ToolRepr{}
	}
	httpjson.Write(w, http.StatusOK, out)
}

func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if h.WriteError != nil {
		h.WriteError(w, r, err)
		return
	}
	status := http.StatusInternalServerError
	if sc, ok := err.(interface{ StatusCode() int }); ok {
		status = sc.StatusCode()
	}
	httpjson.Write(w, status, map[string]any{"error": map[string]any{"message": err.Error()}})
}

func (h *Handler) serveRun(w http.ResponseWriter, r *http.Request) {
	ctx := h.Context
	done := func() {}
	if h.Admit != nil {
		var err error
		if ctx, done, err = h.Admit(r); err != nil {
			h.writeError(w, r, err)
			return
		}
	}
	if n := h.runs.Add(1); h.MaxRuns > 0 && n > int64(h.MaxRuns) {
		done()
		h.runs.Add(-1)
		w.Header().Set("Retry-After", "5")
		httpjson.Write(w, http.StatusServiceUnavailable, map[string]any{"error": map[string]any{"code": "busy",
			"message": "this server runs as many agents as it may at once: try again later"}})
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{OriginPatterns: h.OriginPatterns})
	if err != nil {
		h.runs.Add(-1)
		done()
		return // Accept answered with the HTTP error
	}
	ws.SetReadLimit(hardLimit)
	c := &conn{h: h, ws: ws, tokens: float64(h.burst()), last: time.Now(), owner: h.ownerOf(r), agent: r.PathValue("name")}
	if h.EndUser != nil {
		c.endUser = h.EndUser(r)
	}
	if ctx == nil {
		ctx = context.WithoutCancel(r.Context())
	}
	// The run goes on in a goroutine of its own and the handler returns:
	// the HTTP server's state for the request (its buffers, its deep
	// stack) is freed while the run waits, which is most of its life.
	id := r.URL.Query().Get("run_id")
	go func() {
		defer done()
		defer h.runs.Add(-1)
		if id != "" {
			c.reconnect(id)
			return
		}
		c.serve(ctx, r.PathValue("name"))
	}()
}

func (h *Handler) maxFrame() int64 {
	if h.MaxFrame > 0 {
		return h.MaxFrame
	}
	return agentproto.DefaultMaxFrame
}

func (h *Handler) rate() float64 {
	if h.Rate > 0 {
		return h.Rate
	}
	return DefaultRate
}

func (h *Handler) burst() int {
	if h.Burst > 0 {
		return h.Burst
	}
	return DefaultBurst
}

// conn is one websocket: one run.
type conn struct {
	h  *Handler
	ws *websocket.Conn

	endUser string
	owner   string // who the connection comes from (Handler.Owner)
	agent   string // the agent's name in the request
	// recorded: the run's end is kept for a reconnection (record).
	recorded bool
	// started is when the run started (its run_started frame).
	started time.Time
	// runCtx is the run's context (Admit's), told of its failure.
	runCtx context.Context

	mu     sync.Mutex
	seq    int64
	closed bool
	run    *agents.Run
	// followUps is the run frame's follow_ups; answered is set once the
	// run's final_result is sent, and idle closes the connection when no
	// follow-up comes.
	followUps bool
	answered  bool
	idle      *time.Timer

	// the rate limiter's bucket
	tokens float64
	last   time.Time
}

// send writes a frame with the connection's next seq. After the run's
// terminal frame the connection closes normally and nothing more is
// sent.
func (c *conn) send(f *agentproto.Frame) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f.RunID == "" && c.run != nil {
		f.RunID = c.run.ID
	}
	c.record(f) // even when the client is gone: it may reconnect for the end
	if c.closed {
		return
	}
	c.seq++
	f.Seq = c.seq
	data, err := json.Marshal(f)
	if err != nil {
		data, _ = json.Marshal(&agentproto.Frame{Type: agentproto.TypeError, Seq: f.Seq, RunID: f.RunID, MinionID: f.MinionID,
			Code: agentproto.CodeInternal, Message: "a frame could not be encoded: " + err.Error()})
	}

	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	err = c.ws.Write(ctx, websocket.MessageText, data)
	cancel()
	if err != nil {
		c.closed = true
		if c.run != nil {
			c.run.Cancel()
		}
		return
	}
	if f.Terminal() && f.Type == agentproto.TypeFinalResult && c.followUps {
		// The client may follow up on the conversation: the connection
		// stays open until it does, closes it, or stays idle too long.
		c.answered = true
		c.idle = time.AfterFunc(c.h.Runtime.IdleTimeout(), c.close)
		return
	}
	if f.Terminal() {
		c.closed = true
		go c.ws.Close(websocket.StatusNormalClosure, "") //nolint:errcheck // the peer may be gone
	}
}

// close ends the connection normally, with nothing more to send.
func (c *conn) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.ws.Close(websocket.StatusNormalClosure, "") //nolint:errcheck // the peer may be gone
}

// followUp handles a frame of the client after the run's final_result
// (with follow_ups): input starts a follow-up run on the conversation,
// stop closes the connection; false ends the connection.
func (c *conn) followUp(ctx context.Context, f, problem *agentproto.Frame) bool {
	switch {
	case problem != nil:
		c.send(problem)
	case f.Type == agentproto.TypeStop:
		c.close()
		return false
	case f.Type == agentproto.TypeInput:
		c.mu.Lock()
		run := c.run
		c.mu.Unlock()
		<-run.Done() // the final_result is sent just before it ends
		if !run.Answered() {
			return false
		}
		c.mu.Lock()
		c.answered = false
		c.idle.Stop()
		c.mu.Unlock()
		next := c.h.Runtime.FollowUp(ctx, run, f.Content, c.send)
		c.mu.Lock()
		c.run = next
		c.mu.Unlock()
	default:
		c.send(agentproto.ErrorFrame(agentproto.CodeProtocol, "the run is over: send an input frame to follow up on its conversation, or stop to close the connection"))
	}
	return true
}

// fail ends a connection that has no run with an error frame.
func (c *conn) fail(code, msg string) {
	c.send(agentproto.ErrorFrame(code, msg))
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.ws.Close(websocket.StatusNormalClosure, "") //nolint:errcheck // the peer may be gone
}

// allow takes a token from the connection's bucket.
func (c *conn) allow() bool {
	now := time.Now()
	c.tokens += now.Sub(c.last).Seconds() * c.h.rate()
	c.last = now
	if max := float64(c.h.burst()); c.tokens > max {
		c.tokens = max
	}
	if c.tokens < 1 {
		return false
	}
	c.tokens--
	return true
}

// errTooLarge marks a frame over MaxFrame.
var errTooLarge = errors.New("frame too large")

// read returns the next frame's text.
func (c *conn) read(ctx context.Context) ([]byte, error) {
	_, rd, err := c.ws.Reader(ctx)
	if err != nil {
		return nil, err
	}
	limit := c.h.maxFrame()
	data, err := io.ReadAll(io.LimitReader(rd, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		if _, err := io.Copy(io.Discard, rd); err != nil {
			return nil, err
		}
		return nil, errTooLarge
	}
	return data, nil
}

// frame reads and checks the client's next frame; problem is the error
// frame it deserves (nil when it is fine), err ends the connection.
func (c *conn) frame(ctx context.Context) (*agentproto.Frame, *agentproto.Frame, error) {
	data, err := c.read(ctx)
	if errors.Is(err, errTooLarge) {
		return nil, agentproto.ErrorFrame(agentproto.CodeFrameTooLarge, "the frame is larger than this server's limit of "+bytesize.String(c.h.maxFrame())+" and was discarded"), nil
	}
	if err != nil {
		return nil, nil, err
	}
	if !c.allow() {
		return nil, agentproto.ErrorFrame(agentproto.CodeRateLimited, "frames are coming faster than this server takes them: this one was discarded"), nil
	}
	if err := agentproto.ValidateFrame(data); err != nil {
		return nil, agentproto.ErrorFrame(agentproto.CodeProtocol, "bad frame: "+err.Error()), nil
	}
	f, err := agentproto.Decode(data)
	if err != nil {
		return nil, agentproto.ErrorFrame(agentproto.CodeProtocol, err.Error()), nil
	}
	return f, nil, nil
}

// serve runs one connection: the run frame, the run, the client's
// frames until the run ends or the client goes.
func (c *conn) serve(ctx context.Context, name string) {
	defer c.ws.CloseNow() //nolint:errcheck // already closed when all went well
	first := c.h.FirstFrame
	if first <= 0 {
		first = DefaultFirstFrame
	}
	// Reads never take a context that ends: the websocket library closes
	// the connection when one does, before the error frame could go.
	timer := time.AfterFunc(first, func() { c.fail(agentproto.CodeTimeout, "no run frame within "+first.String()) })
	f, problem, err := c.frame(context.Background())
	if !timer.Stop() {
		return // timed out: the error frame is sent
	}
	switch {
	case err != nil:
		return
	case problem != nil:
		c.fail(problem.Code, problem.Message)
		return
	case f.Type != agentproto.TypeRun:
		c.fail(agentproto.CodeProtocol, "the first frame of a connection must be a run frame, not "+f.Type)
		return
	}
	start := time.Now()
	c.mu.Lock()
	c.runCtx = ctx
	c.mu.Unlock()
	req := agents.RequestFrom(f)
	req.EndUser = c.endUser
	c.mu.Lock()
	c.followUps = req.FollowUps
	c.mu.Unlock()
	run := c.h.Runtime.Start(ctx, name, req, c.send)
	c.mu.Lock()
	c.run = run
	c.mu.Unlock()
	for {
		f, problem, err := c.frame(context.Background())
		if err != nil {
			break
		}
		c.mu.Lock()
		answered := c.answered
		c.mu.Unlock()
		if answered {
			if !c.followUp(ctx, f, problem) {
				break
			}
			c.mu.Lock()
			run = c.run
			c.mu.Unlock()
			continue
		}
		over := false
		select {
		case <-run.Done():
			over = true
		default:
		}
		if problem == nil && f.Type == agentproto.TypeInput && c.followUps && (over || !run.Deliver(f)) {
			// An input the run did not take (it was writing its last
			// answer) is the next message: a follow-up, once the run's
			// final_result is sent.
			if !c.followUp(ctx, f, nil) {
				break
			}
			c.mu.Lock()
			run = c.run
			c.mu.Unlock()
			continue
		}
		switch {
		case over:
			// the run is over: nothing more to take
		case problem != nil:
			c.send(problem)
		case f.Type != agentproto.TypeInput || !c.followUps:
			run.Deliver(f)
		}
	}
	// The client is gone (or the run ended and the connection closed).
	run.Cancel()
	<-run.Done()
	if c.h.Log != nil {
		c.h.Log.Info("agent run", "agent", name, "run", run.ID, "seconds", time.Since(start).Seconds())
	}
}
