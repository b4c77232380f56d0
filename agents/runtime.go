package agents

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/admission"
	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/agentproto"
	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/eventlog"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/tool"
)

// Catalog is the set of agents a Runtime serves. ctx is the request's
// or the run's: a server whose clients see different agents (by their
// tokens) answers for the client of ctx.
type Catalog interface {
	// Agent finds an agent by name; an error says why there is none for
	// this client (a *Failure keeps its code; any other is
	// unknown_agent).
	Agent(ctx context.Context, name string) (*Agent, error)
	// Agents lists them, in a stable order.
	Agents(ctx context.Context) []*Agent
}

// Remote says how a Runtime reaches the remote minions of its runs.
type Remote struct {
	// Tokens are the tokens of remote servers by host ("host" or
	// "host:port", as in the minion's URL). A token is sent to its host
	// only, never to another one, and redirects are not followed.
	Tokens map[string]string
	// AllowHosts are the hosts a client may name in the minions of a run
	// (host or host:port); the hosts of Tokens are allowed too. The
	// minions of the server's own cartridges may be anywhere.
	AllowHosts []string
	// HTTPClient dials them; nil is a client that follows no redirects.
	HTTPClient *http.Client
}

// Defaults of a Runtime.
const (
	DefaultIdleLimit = 10 * time.Minute
	DefaultMaxDepth  = 5
)

// Runtime runs the agents of a Catalog. It is safe for concurrent use:
// a server shares one among all its connections.
type Runtime struct {
	// ID names this server in the chains of federated runs; New gives a
	// random one.
	ID      string
	Catalog Catalog
	Remote  Remote
	// IdleLimit bounds each wait for the client: a tool result or a
	// confirmation (DefaultIdleLimit when 0).
	IdleLimit time.Duration
	// MaxRunTime bounds a run from start to end (none when 0).
	MaxRunTime time.Duration
	// MaxDepth bounds a chain of runs, across servers and within this
	// one (DefaultMaxDepth when 0).
	MaxDepth int

	reprs sync.Map // remote URL -> *agentproto.AgentRepr
}

// New returns a Runtime for catalog with a random ID.
func New(catalog Catalog) *Runtime {
	return &Runtime{ID: "nb-" + randomHex(6), Catalog: catalog}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) //nolint:errcheck // never fails
	return hex.EncodeToString(b)
}

func (rt *Runtime) idleLimit() time.Duration {
	if rt.IdleLimit > 0 {
		return rt.IdleLimit
	}
	return DefaultIdleLimit
}

func (rt *Runtime) maxDepth() int {
	if rt.MaxDepth > 0 {
		return rt.MaxDepth
	}
	return DefaultMaxDepth
}

// Tools describes the tools the server runs: those of every agent's
// bot (cartridge functions, robopages, MCP tools), each name once.
func (rt *Runtime) Tools(ctx context.Context) []agentproto.ToolRepr {
	var out []agentproto.ToolRepr
	seen := map[string]bool{}
	for _, a := range rt.Catalog.Agents(ctx) {
		for _, t := range a.Bot.Tools().Tools() {
			sp := t.Spec()
			key := tool.MatchName(sp.Name)
			if seen[key] || (a.ToolNames != nil && !containsMatch(a.ToolNames, sp.Name)) {
				continue
			}
			seen[key] = true
			out = append(out, agentproto.ToolRepr{Name: sp.Name, Description: sp.Description, InputSchema: sp.Parameters})
		}
	}
	return out
}

func containsMatch(names []string, name string) bool {
	key := tool.MatchName(name)
	for _, n := range names {
		if tool.MatchName(n) == key {
			return true
		}
	}
	return false
}

// Request is what a run frame asks for.
type Request struct {
	Input      any
	Context    any
	Parameters map[string]any
	// Tools are the tools the client runs itself.
	Tools []agentproto.ToolRepr
	// Minions are the client's extra minions.
	Minions []agentproto.MinionRef
	// Chunks asks for step_chunk frames.
	Chunks bool
	// Chain is the servers and runs that led to this run.
	Chain []agentproto.Hop
	// EndUser is who the run is for (a server's client), passed to the
	// exchanges (see bot.Exchange.EndUser).
	EndUser string
	// Events asks for event frames (see eventFrame).
	Events bool
	// FollowUps keeps the connection open after a final_result: an input
	// frame then starts a follow-up on the same conversation.
	FollowUps bool
}

// RequestFrom reads a run frame.
func RequestFrom(f *agentproto.Frame) Request {
	return Request{Input: f.Input, Context: f.Context, Parameters: f.Parameters, Tools: f.Tools, Minions: f.Minions, Chunks: f.Chunks, Chain: f.Chain, Events: f.Events, FollowUps: f.FollowUps}
}

// Failure ends a run with an error frame.
type Failure struct {
	Code, Message string
	// Chain is set for a refused federation.
	Chain []agentproto.Hop
}

func (f *Failure) Error() string { return f.Message }

// Run is one run in progress. Its frames go to the function given to
// Start, without seq and run_id (the transport stamps them) and with
// minion ids relative to the run; the client's frames come in through
// Deliver.
type Run struct {
	// ID is the run's id.
	ID string

	rt     *Runtime
	agent  *Agent
	req    Request
	out    func(*agentproto.Frame)
	ctx    context.Context
	cancel context.CancelCauseFunc
	// memory is the run's conversation, which a follow-up goes on.
	memory   *agent.Memory
	done     chan struct{}
	calls    *callTable
	top      *Run // the run the client started (itself for a top run)
	chain    []agentproto.Hop
	minionID string // relative to the parent, for names of frames

	mu      sync.Mutex
	context any
	steer   []string
	// steerClosed is set once the exchange took its last input: an input
	// then is not the run's (Deliver says so).
	steerClosed bool
	started     bool
	ids         map[string]string // provider call id -> protocol call id
	nextCall    int
	nextMin     int
	step        int
	usage       agentproto.Usage
	deltas      strings.Builder
	tools       *tool.Set
	result      any
	failure     *Failure
	finalSent   bool
}

// Done is closed when the run has ended (its terminal frame sent).
func (r *Run) Done() <-chan struct{} { return r.done }

// Cancel ends the run without a frame: the connection is gone. Its tool
// processes are killed and no further model call is made.
func (r *Run) Cancel() {
	r.cancel(&Failure{Code: agentproto.CodeCancelled, Message: "the connection was closed"})
}

// Start begins a run of the agent name: it checks the request, sends
// run_started (or an error frame, and the run is done) and runs the
// agent in its own goroutine. out receives every frame of the run and
// of its minions; it must be safe for concurrent use.
func (rt *Runtime) Start(ctx context.Context, name string, req Request, out func(*agentproto.Frame)) *Run {
	r := rt.newRun(ctx, nil, req, nil)
	r.out = func(f *agentproto.Frame) {
		f.RunID = r.ID
		out(f)
	}
	r.top = r
	r.calls = newCallTable()
	a, err := rt.Catalog.Agent(ctx, name)
	if err != nil {
		f, ok := err.(*Failure)
		if !ok {
			f = &Failure{Code: agentproto.CodeUnknownAgent, Message: err.Error()}
		}
		r.end(f)
		return r
	}
	r.agent = a
	if f := rt.checkChain(req.Chain, a.Name()); f != nil {
		r.end(f)
		return r
	}
	r.chain = append(append([]agentproto.Hop(nil), req.Chain...), agentproto.Hop{Server: rt.ID, RunID: r.ID, Agent: a.Name()})
	go r.execute()
	return r
}

// FollowUp starts a run that goes on the conversation of prev, which
// ended with a final_result: input is the user's next message, the
// context prev's last. It sends run_started with a run id of its own,
// then the run's frames, as Start does.
func (rt *Runtime) FollowUp(ctx context.Context, prev *Run, input string, out func(*agentproto.Frame)) *Run {
	req := prev.req
	req.Input, req.Context = input, prev.Context()
	r := rt.newRun(ctx, nil, req, nil)
	r.out = func(f *agentproto.Frame) {
		f.RunID = r.ID
		out(f)
	}
	r.top, r.calls, r.agent, r.memory = r, newCallTable(), prev.agent, prev.memory
	if n := len(prev.chain); n > 0 {
		r.chain = append(append([]agentproto.Hop(nil), prev.chain[:n-1]...), agentproto.Hop{Server: rt.ID, RunID: r.ID, Agent: prev.agent.Name()})
	}
	go r.execute()
	return r
}

// Answered reports whether the run is over with a final_result: a
// follow-up may go on its conversation.
func (r *Run) Answered() bool {
	select {
	case <-r.done:
	default:
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failure == nil && r.agent != nil
}

// IdleTimeout is how long the server waits for the client (see
// IdleLimit).
func (rt *Runtime) IdleTimeout() time.Duration { return rt.idleLimit() }

// checkChain refuses a run that would close a cycle through this server
// or go deeper than MaxDepth.
func (rt *Runtime) checkChain(chain []agentproto.Hop, agentName string) *Failure {
	for _, h := range chain {
		if h.Server == rt.ID {
			full := append(append([]agentproto.Hop(nil), chain...), agentproto.Hop{Server: rt.ID, Agent: agentName})
			return &Failure{Code: agentproto.CodeFederationRefused, Chain: full,
				Message: fmt.Sprintf("refused: this run would call back into its own chain (%s): server %s is already in it", chainText(full), rt.ID)}
		}
	}
	if len(chain) >= rt.maxDepth() {
		full := append(append([]agentproto.Hop(nil), chain...), agentproto.Hop{Server: rt.ID, Agent: agentName})
		return &Failure{Code: agentproto.CodeFederationRefused, Chain: full,
			Message: fmt.Sprintf("refused: the chain of runs (%s) would be deeper than %d", chainText(full), rt.maxDepth())}
	}
	return nil
}

func chainText(chain []agentproto.Hop) string {
	parts := make([]string, len(chain))
	for i, h := range chain {
		parts[i] = h.String()
	}
	return strings.Join(parts, " -> ")
}

func (rt *Runtime) newRun(ctx context.Context, parent *Run, req Request, out func(*agentproto.Frame)) *Run {
	r := &Run{ID: "r_" + randomHex(6), rt: rt, req: req, out: out, done: make(chan struct{}), ids: map[string]string{}, context: req.Context,
		memory: agent.NewMemory()}
	if parent != nil {
		r.top, r.calls = parent.top, parent.calls
	}
	var cancel context.CancelFunc = func() {}
	if parent == nil && rt.MaxRunTime > 0 {
		ctx, cancel = context.WithTimeoutCause(ctx, rt.MaxRunTime, &Failure{Code: agentproto.CodeTimeout, Message: fmt.Sprintf("the run took longer than %s", rt.MaxRunTime)})
	}
	ctx, cc := context.WithCancelCause(ctx)
	r.ctx, r.cancel = ctx, func(cause error) { cc(cause); cancel() }
	return r
}

// end sends the terminal frame of a run that ends before or without a
// result.
func (r *Run) end(f *Failure) {
	r.mu.Lock()
	r.failure = f
	r.mu.Unlock()
	if r.top == r {
		e := agentproto.ErrorFrame(f.Code, f.Message)
		e.Chain = f.Chain
		r.out(e)
	}
	r.cancel(f)
	close(r.done)
}

// Deliver handles a frame of the client: a tool result, a confirmation,
// steering or stop. A frame that does not fit gets an error frame and
// the run goes on. It returns false for an input that came after the
// run's exchange took its last one (the run is ending): with follow_ups
// the caller starts a follow-up with it; without, the client is told it
// was not taken.
func (r *Run) Deliver(f *agentproto.Frame) bool {
	switch f.Type {
	case agentproto.TypeToolResult, agentproto.TypeConfirmResult:
		if e := r.calls.answer(f); e != nil {
			r.out(e)
		}
	case agentproto.TypeInput:
		if r.agent != nil && r.agent.NoFeedback {
			r.out(agentproto.ErrorFrame(agentproto.CodeProtocol, fmt.Sprintf("the agent %s takes no input while it runs (its allow-feedback is false)", r.agent.Name())))
			return true
		}
		r.mu.Lock()
		closed := r.steerClosed
		if !closed {
			r.steer = append(r.steer, f.Content)
		}
		r.mu.Unlock()
		if closed {
			if r.req.FollowUps {
				return false
			}
			r.out(agentproto.ErrorFrame(agentproto.CodeProtocol, "this input came after the run's last answer was written and was not given to the model: send it in a new run, or start runs with follow_ups to go on with the conversation"))
		}
	case agentproto.TypeStop:
		r.cancel(&Failure{Code: agentproto.CodeCancelled, Message: "stopped by the client"})
	case agentproto.TypeRun:
		r.out(agentproto.ErrorFrame(agentproto.CodeProtocol, "this connection already has a run: open another connection for another run"))
	default:
		r.out(agentproto.ErrorFrame(agentproto.CodeProtocol, fmt.Sprintf("a client does not send %s frames (it sends run, tool_result, confirm_result, input and stop)", f.Type)))
	}
	return true
}

// nextTurn takes the inputs that came while the exchange's last round
// ran, too late to steer it: they are the conversation's next turn,
// answered in the same run. With none, the run takes no more input.
func (r *Run) nextTurn() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.steer
	r.steer = nil
	if len(s) == 0 {
		r.steerClosed = true
	}
	return s
}

// steering drains the client's input frames.
func (r *Run) steering() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.steer
	r.steer = nil
	return s
}

// Context is the run's context as it is now.
func (r *Run) Context() any {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.context
}

func (r *Run) setContext(v any) {
	r.mu.Lock()
	r.context = v
	r.mu.Unlock()
}

// outcome is how a run (or a minion) ended.
type outcome struct {
	result  any
	context any
	usage   agentproto.Usage
	failure *Failure
	// stopped and notice say a limit ended the run before an answer
	// (agent.Result.Stopped and Notice).
	stopped, notice string
}

// execute runs the agent and sends the terminal frame.
func (r *Run) execute() {
	o := r.run()
	if o.failure != nil {
		r.end(o.failure)
		return
	}
	if r.top == r {
		r.out(&agentproto.Frame{Type: agentproto.TypeFinalResult, Result: o.result, Context: o.context, Usage: &o.usage, Stopped: o.stopped, Message: o.notice})
	}
	r.mu.Lock()
	r.result = o.result
	r.mu.Unlock()
	r.cancel(context.Canceled)
	close(r.done)
}

// run checks the request, runs the agent's exchange and checks its
// result. A panic of the exchange is contained by the bot (a
// *bot.PanicError, with its stack); one here fails the run alike.
func (r *Run) run() (o outcome) {
	defer func() {
		if p := recover(); p != nil {
			pe := &bot.PanicError{Value: p, Stack: debug.Stack()}
			o = outcome{failure: &Failure{Code: agentproto.CodeInternal, Message: pe.Error()}}
		}
	}()
	a := r.agent
	if f := r.validate(); f != nil {
		return outcome{failure: f}
	}
	extra, f := r.extraTools()
	if f != nil {
		return outcome{failure: f}
	}
	x := bot.Exchange{Mode: cartridge.Eval, Conversation: r.memory, Tools: extra, Confirmer: r, OnEvent: r.onEvent, EndUser: r.req.EndUser,
		Loop: agent.Loop(a.Type), MaxTasks: a.MaxTasks, OnPlan: r.onPlan, Start: r.start}
	if r.top == r {
		x.Steering, x.SteerFirst = r.steering, true
	}
	if a.ToolNames != nil {
		x.ToolFilter = func(t tool.Tool) bool { return containsMatch(a.ToolNames, t.Spec().Name) }
	}
	if settings := a.settingsFor(r.req.Parameters); settings != nil {
		x.Override = &provider.Override{Settings: settings}
	}
	if !a.textOutput {
		x.Structured = &provider.OutputSchema{Name: a.Name(), Schema: a.Repr.OutputSchema}
	}
	x.Check = func(text string) string {
		if _, problem := r.checkOutput(text); problem != "" {
			return "Your answer is not valid against the output schema: " + problem + ". Answer again with only the JSON value, valid against the schema."
		}
		return ""
	}
	input := inputText(r.req.Input)
	var res *agent.Result
	for {
		var err error
		res, err = a.Bot.Ask(r.ctx, x, input)
		if err != nil {
			return outcome{failure: r.classify(err)}
		}
		if r.top != r {
			break
		}
		// An input sent while the last round ran (no tool round came
		// to take it) is never lost: it is the next turn.
		more := r.nextTurn()
		if len(more) == 0 {
			break
		}
		input = strings.Join(more, "\n\n")
	}
	if res.Stopped != "" {
		// A limit ended the run before an answer: a result of none, and
		// why, with the context and usage so far.
		r.mu.Lock()
		defer r.mu.Unlock()
		return outcome{context: r.context, usage: r.usage, stopped: res.Stopped, notice: res.Notice}
	}
	result, problem := r.checkOutput(res.Text)
	if problem != "" {
		return outcome{failure: &Failure{Code: agentproto.CodeValidation, Message: "the agent's result is not valid against its output_schema, even when asked again: " + problem}}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return outcome{result: result, context: r.context, usage: r.usage}
}

// start is called by the exchange once its tools are known: it refuses
// a run that lacks a required tool (the *Failure is the exchange's
// error), and announces the run.
func (r *Run) start(tools *tool.Set) error {
	r.tools = tools
	if f := r.checkRequired(); f != nil {
		return f
	}
	r.mu.Lock()
	announce := r.top == r && !r.started
	r.started = true
	r.mu.Unlock()
	if announce {
		r.out(&agentproto.Frame{Type: agentproto.TypeRunStarted, Agent: r.agent.Name()})
	}
	return nil
}

// validate checks input, parameters and context against the agent's
// schemas.
func (r *Run) validate() *Failure {
	a := r.agent
	if err := a.input.Validate(agentproto.Plain(r.req.Input)); err != nil {
		return &Failure{Code: agentproto.CodeValidation, Message: "input: " + agentproto.SchemaError(err).Error()}
	}
	params := map[string]any{}
	for k, v := range r.req.Parameters {
		params[k] = v
	}
	if a.params != nil {
		if err := a.params.Validate(agentproto.Plain(params)); err != nil {
			return &Failure{Code: agentproto.CodeValidation, Message: "parameters: " + agentproto.SchemaError(err).Error()}
		}
	}
	if a.context != nil && r.req.Context != nil {
		if err := a.context.Validate(agentproto.Plain(r.req.Context)); err != nil {
			return &Failure{Code: agentproto.CodeValidation, Message: "context: " + agentproto.SchemaError(err).Error()}
		}
	}
	return nil
}

// checkRequired refuses a run whose agent lacks a required tool.
func (r *Run) checkRequired() *Failure {
	var missing []string
	for _, name := range r.agent.Repr.RequiredTools {
		if _, ok := r.tools.Lookup(name); !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return &Failure{Code: agentproto.CodeMissingTools, Message: fmt.Sprintf("the agent %s needs %s, which this server does not have and the run does not declare: declare them in the run's tools or minions",
			r.agent.Name(), strings.Join(missing, ", "))}
	}
	return nil
}

// checkOutput reads the final answer as the output schema says; problem
// says why it does not fit.
func (r *Run) checkOutput(text string) (any, string) {
	a := r.agent
	if a.textOutput {
		return text, ""
	}
	var v any
	if a.Repr.OutputSchema["type"] == "string" {
		v = text
	} else if err := json.Unmarshal([]byte(agent.StripFence(text)), &v); err != nil {
		return nil, "it is not JSON (" + err.Error() + ")"
	}
	if err := a.output.Validate(v); err != nil {
		return nil, agentproto.SchemaError(err).Error()
	}
	return v, ""
}

// classify turns the error of an agent into a failure.
func (r *Run) classify(err error) *Failure {
	var f *Failure
	if cause := context.Cause(r.ctx); cause != nil && errors.As(cause, &f) {
		return f
	}
	if errors.As(err, &f) {
		return f
	}
	var pe *provider.Error
	var ue *provider.UnsupportedError
	switch {
	case errors.As(err, &pe), errors.As(err, &ue):
		return &Failure{Code: agentproto.CodeProvider, Message: err.Error()}
	case errors.Is(err, context.DeadlineExceeded):
		return &Failure{Code: agentproto.CodeTimeout, Message: err.Error()}
	case errors.Is(err, context.Canceled):
		return &Failure{Code: agentproto.CodeCancelled, Message: "the run was cancelled"}
	}
	return &Failure{Code: agentproto.CodeInternal, Message: err.Error()}
}

// onPlan keeps a planner's plan in the context (an object context, or
// none).
func (r *Run) onPlan(p agent.Plan) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m, ok := r.context.(map[string]any)
	if !ok && r.context != nil {
		return
	}
	next := map[string]any{}
	for k, v := range m {
		next[k] = v
	}
	next["plan"] = agentproto.Plain(p)
	r.context = next
}

// protocolID is the id of a call on the wire: unique within the run's
// tree (provider ids repeat from one round to the next).
func (r *Run) protocolID(providerID string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id, ok := r.ids[providerID]; ok && providerID != "" {
		return id
	}
	r.nextCall++
	id := fmt.Sprintf("c%d_%s", r.nextCall, strings.TrimPrefix(r.ID, "r_"))
	if providerID != "" {
		r.ids[providerID] = id
	}
	return id
}

// onEvent turns the agent's events into frames.
func (r *Run) onEvent(ev agent.Event) {
	if r.req.Events {
		if f := eventFrame(ev); f != nil {
			switch ev.Kind {
			case agent.AssistantTextStart:
				r.mu.Lock()
				f.Step = r.step
				r.mu.Unlock()
			case agent.ToolOutput:
				if ev.Call == nil {
					return
				}
				f.ID, f.Name, f.Stream, f.Delta, f.Message = r.protocolID(ev.Call.ID), r.wireName(ev.Call.Name), ev.Stream, ev.Text, ""
			}
			r.out(f)
		}
	}
	switch ev.Kind {
	case agent.RoundStart:
		r.mu.Lock()
		r.step++
		r.deltas.Reset()
		// A new round: the provider's ids may be used again.
		clear(r.ids)
		r.mu.Unlock()
	case agent.TextDelta:
		if ev.Text == "" {
			return
		}
		r.mu.Lock()
		r.deltas.WriteString(ev.Text)
		step := r.step
		r.mu.Unlock()
		if r.req.Chunks {
			r.out(&agentproto.Frame{Type: agentproto.TypeStepChunk, Step: step, Delta: ev.Text})
		}
	case agent.RoundEnd:
		calls := make([]agentproto.ToolCall, len(ev.Calls))
		ctx := r.Context()
		for i, c := range ev.Calls {
			calls[i] = agentproto.ToolCall{ID: r.protocolID(c.ID), Name: r.wireName(c.Name), Input: c.Arguments, Context: ctx}
		}
		r.mu.Lock()
		step := r.step
		streamed := r.deltas.String()
		u := agentproto.Usage{InputTokens: ev.Usage.InputTokens, OutputTokens: ev.Usage.OutputTokens,
			CacheReadTokens: ev.Usage.CacheReadTokens, CacheWriteTokens: ev.Usage.CacheWriteTokens, ReasoningTokens: ev.Usage.ReasoningTokens}
		r.usage = r.usage.Add(u)
		r.mu.Unlock()
		if r.req.Chunks && streamed != ev.Text && strings.HasPrefix(ev.Text, streamed) {
			// Not streamed (or not all of it): the chunks still add up to
			// the step's text.
			r.out(&agentproto.Frame{Type: agentproto.TypeStepChunk, Step: step, Delta: ev.Text[len(streamed):]})
		}
		r.out(&agentproto.Frame{Type: agentproto.TypeStep, Step: step, Generated: agentproto.Text(ev.Text), Usage: &u, Context: ctx, ToolCalls: calls})
	case agent.ToolEnd:
		if ev.Call == nil {
			return
		}
		if t, ok := r.tools.Lookup(ev.Call.Name); ok {
			if _, theirs := t.(protocolTool); theirs {
				return // the client ran it, or a minion reported it
			}
		}
		r.out(&agentproto.Frame{Type: agentproto.TypeToolResult, ID: r.protocolID(ev.Call.ID), Name: r.wireName(ev.Call.Name), Output: ev.Output, IsError: ev.IsError})
	}
}

// eventFrame is the event frame of the loop's events the other frames do
// not carry (the reference's session, input, steering, limit, loop,
// warning and error events, the start of a round's text and a tool's
// output as it runs); nil for the others.
func eventFrame(ev agent.Event) *agentproto.Frame {
	switch ev.Kind {
	case agent.SessionStart, agent.SessionEnd, agent.UserInput, agent.SteeringInjected, agent.TurnLimit, agent.LoopDetection, agent.Warning, agent.Error,
		agent.AssistantTextStart, agent.ToolOutput:
	default:
		return nil
	}
	f := &agentproto.Frame{Type: agentproto.TypeEvent, Kind: ev.Kind.String(), Message: ev.Text}
	switch ev.Kind {
	case agent.TurnLimit:
		f.Step = ev.Round
	case agent.Warning:
		f.ContextTokens, f.ContextBudget = ev.ContextTokens, ev.ContextBudget
	case agent.LoopDetection:
		f.IsError = ev.IsError
	}
	return f
}

// wireName is a tool's own name for a name the provider sent.
func (r *Run) wireName(name string) string {
	if r.tools != nil {
		if t, ok := r.tools.Lookup(name); ok {
			return t.Spec().Name
		}
	}
	return name
}

// Confirm implements agent.Confirmer: a confirm frame, then the client's
// confirm_result. Calls of the client's own tools and of minions are
// allowed unasked: the client decides about its tools, and a minion
// confirms the tools it runs.
func (r *Run) Confirm(ctx context.Context, call tool.Call, text string) (bool, error) {
	if t, ok := r.tools.Lookup(call.Name); ok {
		if _, theirs := t.(protocolTool); theirs {
			return true, nil
		}
	}
	id := r.protocolID(call.ID)
	p, err := r.calls.ask(eventlog.Question{ID: id, Kind: kindConfirm, Name: r.wireName(call.Name), Input: call.Arguments, Text: text})
	if err != nil {
		return false, err
	}
	a, err := r.wait(ctx, p, &agentproto.Frame{Type: agentproto.TypeConfirm, ID: id, Name: r.wireName(call.Name), Input: call.Arguments})
	if err != nil {
		return false, err
	}
	return a.Allow, nil
}

// wait sends the client the question's frame and waits for its answer,
// within the idle limit; when it runs out the whole run fails with a
// timeout. Meanwhile the run counts as waiting on its client, not as in
// progress, for the admission of ctx: from before the frame is sent, so a
// client that starts another run as soon as it sees the question finds
// this one's slot free.
func (r *Run) wait(ctx context.Context, p *eventlog.Pending, question *agentproto.Frame) (eventlog.Reply, error) {
	defer admission.Waiting(ctx)()
	r.out(question)
	a, err := p.Wait(ctx, r.rt.idleLimit())
	var te *eventlog.TimeoutError
	if errors.As(err, &te) {
		f := &Failure{Code: agentproto.CodeTimeout, Message: te.Error()}
		r.top.cancel(f)
		return a, f
	}
	return a, err
}

// hostAllowed tells whether a client may name a minion at u.
func (rt *Runtime) hostAllowed(u *url.URL) bool {
	if _, ok := rt.Remote.Tokens[u.Host]; ok {
		return true
	}
	for _, h := range rt.Remote.AllowHosts {
		if strings.EqualFold(h, u.Host) || strings.EqualFold(h, u.Hostname()) {
			return true
		}
	}
	return false
}
