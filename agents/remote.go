package agents

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"time"

	"github.com/nbots/nb/agentproto"
)

const (
	// discoveryTimeout bounds asking a remote server about its agent.
	discoveryTimeout = 5 * time.Second
	// stopGrace is how long a stopped remote minion has to end.
	stopGrace = time.Second
)

// remoteClient is a client for the server of a run address, with the
// token configured for that host only.
func (rt *Runtime) remoteClient(runURL string) (*agentproto.Client, error) {
	base, _, err := agentproto.ParseAgentURL(runURL)
	if err != nil {
		return nil, err
	}
	u, _ := url.Parse(runURL)
	c, err := agentproto.NewClient(base, rt.Remote.Tokens[u.Host])
	if err != nil {
		return nil, err
	}
	c.HTTPClient = rt.Remote.HTTPClient
	return c, nil
}

// runRemote runs a remote agent as a minion of r through the protocol.
// Its frames are relayed to r's client under mid, with their call ids;
// its tool calls and confirmations go to r's client, and the answers
// back to it. The run carries r's chain, so the remote server can refuse
// a cycle.
func (r *Run) runRemote(ctx context.Context, runURL, name string, input any, mid string) outcome {
	fail := func(format string, args ...any) outcome {
		f := &Failure{Code: agentproto.CodeMinionFailed, Message: fmt.Sprintf(format, args...)}
		e := agentproto.ErrorFrame(f.Code, f.Message)
		e.MinionID = mid
		r.out(e)
		return outcome{failure: f}
	}
	c, err := r.rt.remoteClient(runURL)
	if err != nil {
		return fail("%s: %v", runURL, err)
	}
	conn, err := c.Dial(ctx, runURL)
	if err != nil {
		return fail("%v", err)
	}
	defer conn.Abort()
	run := &agentproto.Frame{Type: agentproto.TypeRun, Input: input, Context: r.Context(), Tools: r.req.Tools, Chunks: r.req.Chunks, Chain: r.chain}
	if err := conn.Send(ctx, run); err != nil {
		return fail("%s: %v", runURL, err)
	}
	// A stopped or dropped run stops the remote one too.
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), stopGrace)
			defer cancel()
			conn.Stop(sctx) //nolint:errcheck // the connection is dropped below anyway
			select {
			case <-stopped:
			case <-sctx.Done():
				conn.Abort()
			}
		case <-stopped:
		}
	}()
	forward := func(f *agentproto.Frame) {
		a := &agentproto.Frame{Type: f.Type, ID: f.ID, Output: f.Output, IsError: f.IsError, Context: f.Context, Allow: f.Allow}
		conn.Send(ctx, a) //nolint:errcheck // a broken connection ends the minion below
	}
	for {
		f, err := conn.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return outcome{failure: &Failure{Code: agentproto.CodeCancelled, Message: "stopped"}}
			}
			if errors.Is(err, io.EOF) {
				return fail("%s closed the run without a result", runURL)
			}
			return fail("%s: %v", runURL, err)
		}
		terminal := f.Terminal()
		switch f.Type {
		case agentproto.TypeRunStarted:
			continue
		case agentproto.TypeFinalResult:
			if terminal {
				u := agentproto.Usage{}
				if f.Usage != nil {
					u = *f.Usage
				}
				return outcome{result: f.Result, context: f.Context, usage: u, stopped: f.Stopped, notice: f.Message}
			}
		case agentproto.TypeToolCall:
			r.calls.relay(f.ID, kindResult, forward)
		case agentproto.TypeConfirm:
			r.calls.relay(f.ID, kindConfirm, forward)
		}
		f.Seq, f.RunID = 0, ""
		f.MinionID = joinMinion(mid, f.MinionID)
		r.out(f)
		if terminal {
			return outcome{failure: &Failure{Code: f.Code, Message: fmt.Sprintf("%s (%s)", f.Message, name)}}
		}
	}
}
