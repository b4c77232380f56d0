package agents

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/agentproto"
	"github.com/nbots/nb/eventlog"
	"github.com/nbots/nb/tool"
)

// protocolTool marks the tools a run adds for the protocol: the
// client's tools and the minions. Their results reach the client their
// own way (the client ran them; minion_result), never as a tool_result
// frame, and the server never asks to confirm them (the client runs its
// own tools; a minion confirms the tools it runs).
type protocolTool interface {
	tool.Tool
	protocol()
}

// The kinds of answer a client gives: the questions of the run tree's
// event log.
const (
	kindResult  = eventlog.RunTool
	kindConfirm = eventlog.Confirm
)

// callTable holds the calls a run tree waits on, by protocol id: the
// questions of the tree's event log, which the client's tool_result and
// confirm_result frames answer, and the calls of remote minions, whose
// answers go back to their server.
type callTable struct {
	log *eventlog.Log

	mu       sync.Mutex
	relayed  map[string]relayedCall
	answered map[string]bool // relayed calls answered
}

// relayedCall is a call of a remote minion: forward takes its answer.
type relayedCall struct {
	kind    eventlog.QuestionKind
	forward func(*agentproto.Frame)
}

func newCallTable() *callTable {
	return &callTable{log: eventlog.New(0), relayed: map[string]relayedCall{}, answered: map[string]bool{}}
}

// ask puts the question in the log before its frame goes out; the
// caller waits for the answer with wait.
func (t *callTable) ask(q eventlog.Question) (*eventlog.Pending, error) {
	return t.log.Ask(q)
}

// relay registers the call id of a remote minion: its answer is passed
// to forward.
func (t *callTable) relay(id string, kind eventlog.QuestionKind, forward func(*agentproto.Frame)) {
	t.mu.Lock()
	t.relayed[id] = relayedCall{kind: kind, forward: forward}
	t.mu.Unlock()
}

// answer delivers a tool_result or confirm_result; it returns the error
// frame for one that answers no pending call.
func (t *callTable) answer(f *agentproto.Frame) *agentproto.Frame {
	kind := kindResult
	if f.Type == agentproto.TypeConfirmResult {
		kind = kindConfirm
	}
	t.mu.Lock()
	rc, relayed := t.relayed[f.ID]
	again := t.answered[f.ID]
	if relayed && rc.kind == kind {
		delete(t.relayed, f.ID)
		t.answered[f.ID] = true
	}
	t.mu.Unlock()
	var err error
	switch {
	case relayed && rc.kind == kind:
		rc.forward(f)
		return nil
	case again:
		err = &eventlog.AnswerError{ID: f.ID, Kind: kind, Again: true}
	default:
		reply := eventlog.Reply{Output: f.Output, IsError: f.IsError, Context: f.Context}
		if f.Allow != nil {
			reply.Allow = *f.Allow
		}
		err = t.log.Answer(f.ID, kind, reply)
	}
	var ae *eventlog.AnswerError
	if !errors.As(err, &ae) {
		return nil
	}
	code := agentproto.CodeUnknownCallID
	if ae.Again {
		code = agentproto.CodeDuplicateResult
	}
	e := agentproto.ErrorFrame(code, ae.Error())
	e.ID = f.ID
	return e
}

// clientTool is a tool the client runs: its call goes to the client as
// a tool_call frame and waits for the tool_result.
type clientTool struct {
	r    *Run
	spec tool.Spec
}

func (c *clientTool) protocol()       {}
func (c *clientTool) Spec() tool.Spec { return c.spec }

// Run implements tool.Tool.
func (c *clientTool) Run(ctx context.Context, call tool.Call) (any, error) {
	r := c.r
	id := r.protocolID(call.ID)
	p, err := r.calls.ask(eventlog.Question{ID: id, Kind: kindResult, Name: c.spec.Name, Input: call.Arguments})
	if err != nil {
		return nil, err
	}
	a, err := r.wait(ctx, p, &agentproto.Frame{Type: agentproto.TypeToolCall, ID: id, Name: c.spec.Name, Input: call.Arguments, Context: r.Context()})
	if err != nil {
		return nil, err
	}
	if a.Context != nil {
		r.setContext(a.Context)
	}
	if a.IsError {
		return &tool.Result{Text: agent.Text(a.Output), IsError: true}, nil
	}
	return a.Output, nil
}

// toolSpec is the spec of a tool the client describes.
func toolSpec(t agentproto.ToolRepr) tool.Spec {
	params := t.InputSchema
	if params == nil {
		params = tool.DefaultParameters()
	}
	return tool.Spec{Name: t.Name, Description: t.Description, Parameters: params}
}

// minionSpec is the spec under which an agent is offered to the model:
// an object input schema as the parameters, any other input wrapped as
// {"input": …}.
func minionSpec(name, description string, input map[string]any) (tool.Spec, bool) {
	if description == "" {
		description = "the agent " + name
	}
	description = "Hand a task to the agent " + name + ": " + description
	if input != nil && input["type"] == "object" {
		return tool.Spec{Name: name, Description: description, Parameters: input}, false
	}
	if input == nil {
		input = textSchema()
	}
	return tool.Spec{Name: name, Description: description, Parameters: map[string]any{
		"type": "object", "properties": map[string]any{"input": input}, "required": []any{"input"}}}, true
}

// minionTool runs an agent, of this server or a remote one, for a call.
type minionTool struct {
	r     *Run
	spec  tool.Spec
	wrap  bool
	local *Agent
	url   string
	name  string // the agent's name (on its server)
}

func (m *minionTool) protocol()       {}
func (m *minionTool) Spec() tool.Spec { return m.spec }

// Run implements tool.Tool: minion_start, the minion's frames, then
// minion_result. A minion that fails is a failed call for the model,
// not a failed run.
func (m *minionTool) Run(ctx context.Context, call tool.Call) (any, error) {
	r := m.r
	var input any = call.Arguments
	if m.wrap {
		input = call.Arguments["input"]
	}
	r.mu.Lock()
	r.nextMin++
	mid := fmt.Sprintf("m%d", r.nextMin)
	r.mu.Unlock()
	r.out(&agentproto.Frame{Type: agentproto.TypeMinionStart, MinionID: mid, Name: m.spec.Name, URL: m.url, Input: input, Context: r.Context()})
	var o outcome
	if m.local != nil {
		o = r.runLocal(ctx, m.local, input, mid)
	} else {
		o = r.runRemote(ctx, m.url, m.name, input, mid)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	end := &agentproto.Frame{Type: agentproto.TypeMinionResult, MinionID: mid, Result: o.result, Context: o.context, Usage: &o.usage, Stopped: o.stopped, Message: o.notice}
	if o.failure != nil {
		end.IsError, end.Message = true, o.failure.Message
	}
	r.out(end)
	if o.context != nil {
		r.setContext(o.context)
	}
	if o.failure != nil {
		return &tool.Result{Text: fmt.Sprintf("The agent %s failed (%s): %s", m.spec.Name, o.failure.Code, o.failure.Message), IsError: true}, nil
	}
	if o.stopped != "" {
		return &tool.Result{Text: fmt.Sprintf("The agent %s stopped without an answer: %s", m.spec.Name, o.notice), IsError: true}, nil
	}
	return o.result, nil
}

// runLocal runs an agent of this server as a minion of r.
func (r *Run) runLocal(ctx context.Context, a *Agent, input any, mid string) outcome {
	out := func(f *agentproto.Frame) {
		f.MinionID = joinMinion(mid, f.MinionID)
		r.out(f)
	}
	refuse := func(f *Failure) outcome {
		f.Chain = append(append([]agentproto.Hop(nil), r.chain...), agentproto.Hop{Server: r.rt.ID, Agent: a.Name()})
		e := agentproto.ErrorFrame(f.Code, f.Message)
		e.Chain = f.Chain
		out(e)
		return outcome{failure: f}
	}
	for _, h := range r.chain {
		if h.Server == r.rt.ID && h.Agent == a.Name() {
			return refuse(&Failure{Code: agentproto.CodeFederationRefused, Message: fmt.Sprintf("refused: %s would call back into its own chain (%s)", a.Name(), chainText(r.chain))})
		}
	}
	if len(r.chain) >= r.rt.maxDepth() {
		return refuse(&Failure{Code: agentproto.CodeFederationRefused, Message: fmt.Sprintf("refused: the chain of runs (%s) would be deeper than %d", chainText(r.chain), r.rt.maxDepth())})
	}
	req := Request{Input: input, Context: r.Context(), Tools: r.req.Tools, Chunks: r.req.Chunks, EndUser: r.req.EndUser}
	child := r.rt.newRun(ctx, r, req, out)
	child.agent = a
	child.chain = append(append([]agentproto.Hop(nil), r.chain...), agentproto.Hop{Server: r.rt.ID, RunID: child.ID, Agent: a.Name()})
	o := child.run()
	child.cancel(nil)
	if o.failure != nil {
		e := agentproto.ErrorFrame(o.failure.Code, o.failure.Message)
		e.Chain = o.failure.Chain
		out(e)
	}
	return o
}

func joinMinion(parent, child string) string {
	if child == "" {
		return parent
	}
	return parent + "/" + child
}

// extraTools are the tools a run adds to its agent's bot: the client's
// tools the server lacks, and the minions (the agent's and the
// client's).
func (r *Run) extraTools() ([]tool.Tool, *Failure) {
	a := r.agent
	have := func(name string) bool {
		if a.ToolNames != nil && !containsMatch(a.ToolNames, name) {
			return false
		}
		_, ok := a.Bot.Tools().Lookup(name)
		return ok
	}
	var out []tool.Tool
	for _, t := range r.req.Tools {
		if have(t.Name) {
			continue // the server's own tool wins
		}
		out = append(out, &clientTool{r: r, spec: toolSpec(t)})
	}
	for _, m := range a.Minions {
		t, f := r.minion(agentproto.MinionRef{AgentRepr: agentproto.AgentRepr{Name: m.Name}, URL: m.URL}, true)
		if f != nil {
			return nil, f
		}
		out = append(out, t)
	}
	for _, m := range r.req.Minions {
		t, f := r.minion(m, false)
		if f != nil {
			return nil, f
		}
		out = append(out, t)
	}
	return out, nil
}

// minion makes the tool of one minion. own says it is the agent's own
// (from its cartridge): its URL may be anywhere and its name must be an
// agent here.
func (r *Run) minion(m agentproto.MinionRef, own bool) (tool.Tool, *Failure) {
	if m.URL != "" {
		u, err := url.Parse(m.URL)
		if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" {
			return nil, &Failure{Code: agentproto.CodeValidation, Message: fmt.Sprintf("minion %s: %q is not a run address (ws://host/agents/NAME/run or wss://…)", m.Name, m.URL)}
		}
		if !own && !r.rt.hostAllowed(u) {
			return nil, &Failure{Code: agentproto.CodeValidation, Message: fmt.Sprintf("minion %s: this server does not run minions on %s for its clients (its configuration lists the hosts it may call)", m.Name, u.Host)}
		}
		_, remoteName, err := agentproto.ParseAgentURL(m.URL)
		if err != nil {
			return nil, &Failure{Code: agentproto.CodeValidation, Message: "minion " + m.Name + ": " + err.Error()}
		}
		repr := r.rt.remoteRepr(r.ctx, m, remoteName)
		spec, wrap := minionSpec(m.Name, repr.Description, repr.InputSchema)
		return &minionTool{r: r, spec: spec, wrap: wrap, url: m.URL, name: remoteName}, nil
	}
	if a, err := r.rt.Catalog.Agent(r.ctx, m.Name); err == nil {
		spec, wrap := minionSpec(a.Name(), a.Repr.Description, a.Repr.InputSchema)
		return &minionTool{r: r, spec: spec, wrap: wrap, local: a, name: a.Name()}, nil
	}
	if own {
		return nil, &Failure{Code: agentproto.CodeMissingTools, Message: fmt.Sprintf("the agent %s has the minion %s, which is not an agent of this server (%s)", r.agent.Name(), m.Name, r.agent.Source)}
	}
	// An agent the client runs itself: its calls go to the client.
	// Its input is wrapped as {"input": …} unless its schema is an object.
	spec, _ := minionSpec(m.Name, m.Description, m.InputSchema)
	return &clientTool{r: r, spec: spec}, nil
}

// remoteRepr describes a remote minion: what the client said, else what
// its server says (asked once), else a plain description.
func (rt *Runtime) remoteRepr(ctx context.Context, m agentproto.MinionRef, remoteName string) agentproto.AgentRepr {
	if m.Description != "" || m.InputSchema != nil {
		return m.AgentRepr
	}
	if v, ok := rt.reprs.Load(m.URL); ok {
		return *v.(*agentproto.AgentRepr)
	}
	c, err := rt.remoteClient(m.URL)
	if err == nil {
		ctx, cancel := context.WithTimeout(ctx, discoveryTimeout)
		defer cancel()
		if repr, err := c.Agent(ctx, remoteName); err == nil {
			rt.reprs.Store(m.URL, repr)
			return *repr
		}
	}
	return agentproto.AgentRepr{Name: m.Name, Description: "the remote agent " + strings.TrimSpace(remoteName) + " at " + m.URL}
}
