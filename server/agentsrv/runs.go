package agentsrv

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/nbots/nb/agentproto"
	"github.com/nbots/nb/eventlog"
	"github.com/nbots/nb/server"
)

// Reconnection. A run belongs to its connection: when the connection
// goes, the run is cancelled. What a client that lost its connection may
// still learn is how the run ended: it opens WS /agents/{name}/run?run_id=ID
// (on any replica of the server when they share a store) and receives
// the run's terminal frame, final_result or error, as it was sent (its
// seq is the new connection's); or an error frame: unknown_run (no such
// run for this client, or it ended longer than RunTTL ago), run_lost (the
// replica that ran it stopped before it ended), run_in_progress (it still
// runs, on the connection that started it). Either way the connection
// then closes.

// DefaultRunTTL is how long the end of a run is kept for a reconnecting
// client.
const DefaultRunTTL = 10 * time.Minute

// reconnectWait is how long a reconnection waits for the end of a run
// that still runs: a run whose connection dropped ends within moments.
// (A variable for the tests.)
var reconnectWait = 5 * time.Second

// runRecord is what a reconnecting client may learn of a run.
type runRecord struct {
	Replica  string          `json:"replica"`
	Agent    string          `json:"agent"`
	Terminal json.RawMessage `json:"terminal,omitempty"`
	// summary is what the server's control page lists of the run (kept
	// beside the record in a shared store, so zero when read from there).
	summary eventlog.Summary
}

// summarize is what the control page lists of a run: its agent, when it
// started, its state (running, finished, stopped by a limit, or failed
// with the protocol's error code) and, once finished, its tokens; never
// its input, result or error message.
func summarize(agent string, started time.Time, terminal *agentproto.Frame) eventlog.Summary {
	s := eventlog.Summary{Label: agent, Status: "running", Created: started.UTC()}
	switch {
	case terminal == nil:
	case terminal.Type == agentproto.TypeError:
		s.Status = "failed: " + terminal.Code
	case terminal.Stopped != "":
		s.Status = "stopped: " + terminal.Stopped
	default:
		s.Status = "finished"
	}
	if terminal != nil && terminal.Usage != nil {
		s.Tokens = terminal.Usage.InputTokens + terminal.Usage.OutputTokens
	}
	return s
}

// RunList lists the runs of every client whose end is kept for a
// reconnection (RunTTL) or that still run, the most recent first, at
// most limit of them, without their contents: for the server's operator
// (nb serve's control page).
func (h *Handler) RunList(ctx context.Context, limit int) ([]eventlog.Entry, error) {
	return h.records().List(ctx, limit)
}

func (h *Handler) records() *eventlog.Keeper[*runRecord] {
	h.recordsOnce.Do(func() {
		ttl := h.RunTTL
		if ttl <= 0 {
			ttl = DefaultRunTTL
		}
		lim := eventlog.Limits{Count: 100_000, Bytes: 64 << 20, TTL: ttl}
		h.runRecords = eventlog.NewKeeper("agent_run", lim, nil, h.Shared,
			func(r *runRecord) ([]byte, error) { return json.Marshal(r) },
			func(b []byte) (*runRecord, error) {
				var r runRecord
				err := json.Unmarshal(b, &r)
				return &r, err
			}).Summarized(func(r *runRecord) eventlog.Summary { return r.summary })
	})
	return h.runRecords
}

func (h *Handler) replica() string {
	if h.Shared != nil {
		return h.Shared.Replica()
	}
	return ""
}

// record keeps what a reconnecting client of this run may learn: that it
// runs here (at run_started), then its terminal frame. The caller holds
// c.mu.
func (c *conn) record(f *agentproto.Frame) {
	if c.recorded || f.MinionID != "" || f.RunID == "" || (f.Type != agentproto.TypeRunStarted && !f.Terminal()) {
		return
	}
	if f.Type == agentproto.TypeRunStarted || c.started.IsZero() {
		c.started = time.Now()
	}
	var terminal *agentproto.Frame
	if f.Terminal() {
		terminal = f
		if f.Type == agentproto.TypeError && f.Code != agentproto.CodeCancelled && c.runCtx != nil {
			// The server's control page lists the failure: its code, not
			// its message.
			server.RunFailed(c.runCtx, &server.Error{Code: f.Code, Message: f.Message})
		}
	}
	rec := &runRecord{Replica: c.h.replica(), Agent: c.agent, summary: summarize(c.agent, c.started, terminal)}
	var data []byte
	if f.Terminal() {
		c.recorded = true
		var err error
		if data, err = json.Marshal(f); err != nil {
			return
		}
		rec.Terminal = data
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.h.records().Put(ctx, f.RunID, c.owner, rec, int64(len(data)+len(rec.Agent)+64)); err != nil && c.h.Log != nil {
		c.h.Log.Warn("the end of an agent run could not be kept for a reconnecting client", "run", f.RunID, "error", err.Error())
	}
}

// reconnect answers a client that reconnects to run id.
func (c *conn) reconnect(id string) {
	defer c.ws.CloseNow() //nolint:errcheck // already closed when all went well
	c.mu.Lock()
	c.recorded = true // what it sends is a record already
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), reconnectWait+5*time.Second)
	defer cancel()
	deadline := time.Now().Add(reconnectWait)
	for {
		rec, ok, err := c.h.records().Get(ctx, id, c.owner)
		switch {
		case err != nil:
			c.fail(agentproto.CodeInternal, "the run's record cannot be read: "+err.Error())
			return
		case !ok:
			c.fail(agentproto.CodeUnknownRun, fmt.Sprintf("there is no run %s for this client: the end of a run is kept for %s", id, c.h.runTTL()))
			return
		case rec.Terminal != nil:
			f, err := agentproto.Decode(rec.Terminal)
			if err != nil {
				c.fail(agentproto.CodeInternal, "the run's terminal frame cannot be read: "+err.Error())
				return
			}
			c.send(f)
			return
		}
		alive := rec.Replica == c.h.replica()
		if !alive {
			if alive, err = c.h.Shared.Alive(ctx, rec.Replica); err != nil {
				c.fail(agentproto.CodeInternal, "whether the run's replica runs cannot be told: "+err.Error())
				return
			}
		}
		if !alive {
			c.fail(agentproto.CodeRunLost, fmt.Sprintf("run %s was lost with its replica %s, which stopped before the run ended: start the run again", id, rec.Replica))
			return
		}
		if time.Now().After(deadline) {
			where := "on this server"
			if rec.Replica != "" {
				where = "on replica " + rec.Replica
			}
			c.fail(agentproto.CodeRunInProgress, fmt.Sprintf("run %s still runs %s, on the connection that started it: a run cannot be joined from another connection", id, where))
			return
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
			return
		}
	}
}

func (h *Handler) runTTL() time.Duration {
	if h.RunTTL > 0 {
		return h.RunTTL
	}
	return DefaultRunTTL
}

// ownerOf is who r comes from, "" without Handler.Owner.
func (h *Handler) ownerOf(r *http.Request) string {
	if h.Owner == nil {
		return ""
	}
	return h.Owner(r)
}
