package bot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/builtin"
	"github.com/nbots/nb/tool"
)

// maxChildren bounds the managed sub-agents one exchange may start: each
// is a conversation with the provider, and a model in a loop could start
// them without end.
const maxChildren = 16

// closeGrace is how long close_agent waits for a sub-agent to stop
// after it was told to (its commands' process groups are killed at
// once; a provider request ends when its connection does).
const closeGrace = 10 * time.Second

// agentManager runs the managed sub-agents (builtins.spawn.managed) of
// one exchange, the parent: each runs in the background on a context
// derived from the parent's, so that aborting the parent stops them and
// the commands they run; when the parent's exchange ends, the ones still
// running are closed and waited for (close).
type agentManager struct {
	b      *Bot
	parent Exchange // where the children report and ask (see subExchange)
	depth  int      // the parent's depth
	ctx    context.Context

	mu     sync.Mutex
	seq    int
	kids   map[string]*child
	closed bool
	wg     sync.WaitGroup
}

// child is one managed sub-agent.
type child struct {
	id, model, dir string // dir: relative to the parent's workspace
	spec           subSpec
	tools          *tool.Set // its tools (before its own sub-agent tools are bound)
	conv           *agent.Memory
	ctx            context.Context
	cancel         context.CancelFunc

	// Guarded by the manager's mu.
	status string
	output string
	turns  int
	queue  []string      // messages sent with send_input, not yet read
	done   chan struct{} // closed when the run in progress ends
	closed bool
}

func newAgentManager(ctx context.Context, b *Bot, parent Exchange, depth int) *agentManager {
	return &agentManager{b: b, parent: parent, depth: depth, ctx: ctx, kids: map[string]*child{}}
}

// Start implements builtin.Agents.
func (m *agentManager) Start(_ context.Context, req builtin.AgentRequest) (string, error) {
	max := m.b.spawnDepth
	if req.Depth > max {
		return "", fmt.Errorf("sub-agents may nest %d deep (builtins.spawn.max-depth): this one would be at depth %d", max, req.Depth)
	}
	dir, rel := m.parent.workspace, ""
	if req.WorkingDir != "" && m.b.builtins.Remote {
		return "", errors.New("working_dir is for a local workspace: with builtins.environment on another machine a sub-agent works in the parent's folder (leave working_dir out)")
	}
	if req.WorkingDir != "" {
		var err error
		if dir, rel, err = subWorkspace(m.b.workspaceOf(m.parent), req.WorkingDir); err != nil {
			return "", err
		}
	}
	if _, err := m.b.providerFor(req.Model); err != nil {
		return "", err
	}
	spec := subSpec{names: req.Tools, depth: req.Depth, workspace: dir, model: req.Model, rounds: req.MaxTurns}
	if spec.model == "" {
		spec.model = m.parent.model
	}
	// The tool set is made now, so that a wrong tool name is the call's
	// error rather than the child's failure; every turn uses it.
	tools, err := m.b.subTools(m.parent, spec)
	if err != nil {
		return "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed || m.ctx.Err() != nil {
		return "", errors.New("the exchange is ending: no sub-agent can start")
	}
	if len(m.kids) >= maxChildren {
		return "", fmt.Errorf("this exchange has started %d sub-agents, the most it may: wait for or close the ones you have and use them again with send_input", maxChildren)
	}
	m.seq++
	c := &child{id: fmt.Sprintf("agent-%d", m.seq), model: spec.model, dir: rel, spec: spec, tools: tools, conv: agent.NewMemory()}
	if c.model == "" {
		c.model = agent.Model(m.b.Cartridge)
	}
	c.ctx, c.cancel = context.WithCancel(m.ctx)
	m.kids[c.id] = c
	m.startLocked(c, req.Task)
	return c.id, nil
}

// startLocked runs c on input in the background; m.mu is held.
func (m *agentManager) startLocked(c *child, input string) {
	c.status, c.output = builtin.AgentRunning, ""
	c.done = make(chan struct{})
	m.wg.Add(1)
	go m.run(c, input)
}

// run is one run of c: its input, and then, as long as messages came
// after its last step read them, one more turn with them (a message is
// never lost).
func (m *agentManager) run(c *child, input string) {
	defer m.wg.Done()
	for {
		res, err := m.b.runChild(c.ctx, m, c, input)
		m.mu.Lock()
		if res != nil {
			c.turns += res.Rounds
		}
		switch {
		case c.closed:
			c.status = builtin.AgentClosed
		case err != nil:
			c.status, c.output = builtin.AgentFailed, err.Error()
		case res.Stopped != "":
			c.status, c.output = builtin.AgentFailed, res.Notice
		default:
			c.status, c.output = builtin.AgentCompleted, res.Text
			if strings.TrimSpace(res.Text) == "" {
				c.output = "(The sub-agent finished without an answer.)"
			}
		}
		if len(c.queue) > 0 && !c.closed && c.ctx.Err() == nil {
			input = strings.Join(c.queue, "\n\n")
			c.queue = nil
			c.status = builtin.AgentRunning
			m.mu.Unlock()
			continue
		}
		close(c.done)
		m.mu.Unlock()
		return
	}
}

// steering is the Steering of c's agent: the messages sent to it since
// its last step.
func (m *agentManager) steering(c *child) func() []string {
	return func() []string {
		m.mu.Lock()
		defer m.mu.Unlock()
		q := c.queue
		c.queue = nil
		return q
	}
}

func (m *agentManager) lookup(id string) (*child, error) {
	c, ok := m.kids[strings.TrimSpace(id)]
	if !ok {
		known := make([]string, 0, len(m.kids))
		for k := range m.kids {
			known = append(known, k)
		}
		if len(known) == 0 {
			return nil, fmt.Errorf("no sub-agent %q: you have started none (spawn_agent starts one)", id)
		}
		return nil, fmt.Errorf("no sub-agent %q: yours are %s", id, strings.Join(slices.Sorted(slices.Values(known)), ", "))
	}
	return c, nil
}

// Send implements builtin.Agents.
func (m *agentManager) Send(id, message string) (builtin.AgentStatus, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, err := m.lookup(id)
	if err != nil {
		return builtin.AgentStatus{}, err
	}
	switch {
	case c.closed:
		return builtin.AgentStatus{}, fmt.Errorf("the sub-agent %s was closed: start another", c.id)
	case m.closed || m.ctx.Err() != nil:
		return builtin.AgentStatus{}, errors.New("the exchange is ending")
	case c.status == builtin.AgentRunning:
		c.queue = append(c.queue, message)
	default:
		m.startLocked(c, message)
	}
	return m.statusLocked(c), nil
}

// Wait implements builtin.Agents.
func (m *agentManager) Wait(ctx context.Context, ids []string, timeout time.Duration) ([]builtin.AgentStatus, error) {
	m.mu.Lock()
	var kids []*child
	var dones []chan struct{}
	for _, id := range ids {
		c, err := m.lookup(id)
		if err != nil {
			m.mu.Unlock()
			return nil, err
		}
		kids, dones = append(kids, c), append(dones, c.done)
	}
	m.mu.Unlock()
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
wait:
	for _, d := range dones {
		select {
		case <-d:
		case <-expired:
			break wait
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]builtin.AgentStatus, len(kids))
	for i, c := range kids {
		out[i] = m.statusLocked(c)
	}
	return out, nil
}

// Close implements builtin.Agents.
func (m *agentManager) Close(id string) (builtin.AgentStatus, error) {
	m.mu.Lock()
	c, err := m.lookup(id)
	if err != nil {
		m.mu.Unlock()
		return builtin.AgentStatus{}, err
	}
	c.closed = true
	c.queue = nil
	c.cancel()
	done := c.done
	m.mu.Unlock()
	select {
	case <-done:
	case <-time.After(closeGrace):
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c.status == builtin.AgentRunning {
		c.status = builtin.AgentClosed
	}
	return m.statusLocked(c), nil
}

// close stops every child and waits for them: the parent's exchange
// ends.
func (m *agentManager) close() {
	m.mu.Lock()
	m.closed = true
	for _, c := range m.kids {
		if c.status == builtin.AgentRunning {
			c.closed = true
		}
		c.cancel()
	}
	m.mu.Unlock()
	m.wg.Wait()
}

func (m *agentManager) statusLocked(c *child) builtin.AgentStatus {
	return builtin.AgentStatus{ID: c.id, Status: c.status, Output: c.output, Success: c.status == builtin.AgentCompleted,
		TurnsUsed: c.turns, Model: c.model, WorkingDir: c.dir}
}

// noAgents stands for the managed sub-agents of a tool set not bound to
// an exchange (see bindSpawn).
type noAgents struct{}

var errNoExchange = errors.New("sub-agents run only within an exchange")

func (noAgents) Start(context.Context, builtin.AgentRequest) (string, error) {
	return "", errNoExchange
}
func (noAgents) Send(string, string) (builtin.AgentStatus, error) {
	return builtin.AgentStatus{}, errNoExchange
}
func (noAgents) Wait(context.Context, []string, time.Duration) ([]builtin.AgentStatus, error) {
	return nil, errNoExchange
}
func (noAgents) Close(string) (builtin.AgentStatus, error) {
	return builtin.AgentStatus{}, errNoExchange
}

// subWorkspace resolves a sub-agent's working_dir against its parent's
// workspace: it must name a folder inside it (after links are followed),
// never one outside. It returns the folder's absolute path and its path
// relative to the parent's.
func subWorkspace(parent, dir string) (abs, rel string, err error) {
	if parent == "" {
		return "", "", errors.New("working_dir needs a workspace: this bot has no files or exec built-ins")
	}
	root, err := filepath.EvalSymlinks(parent)
	if err != nil {
		return "", "", fmt.Errorf("the workspace: %w", err)
	}
	p := dir
	if !filepath.IsAbs(p) {
		p = filepath.Join(root, p)
	}
	outside := fmt.Errorf("working_dir %q is outside your workspace: a sub-agent works in a folder inside it", dir)
	if r, err := filepath.Rel(root, filepath.Clean(p)); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", "", outside
	}
	real, err := filepath.EvalSymlinks(p)
	if errors.Is(err, os.ErrNotExist) {
		return "", "", fmt.Errorf("working_dir %q does not exist in your workspace: create it first", dir)
	}
	if err != nil {
		return "", "", fmt.Errorf("working_dir %q: %w", dir, err)
	}
	r, err := filepath.Rel(root, real)
	if err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return "", "", outside
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", "", fmt.Errorf("working_dir %q: %w", dir, err)
	}
	if !fi.IsDir() {
		return "", "", fmt.Errorf("working_dir %q is not a folder", dir)
	}
	return real, r, nil
}

// serialConfirmer asks one question at a time: a parent and its managed
// sub-agents share one confirmer (the user), and their questions must
// not overlap.
type serialConfirmer struct {
	next agent.Confirmer
	turn chan struct{}
}

func serial(c agent.Confirmer) agent.Confirmer {
	if c == nil {
		return nil
	}
	if _, ok := c.(*serialConfirmer); ok {
		return c
	}
	return &serialConfirmer{next: c, turn: make(chan struct{}, 1)}
}

func (s *serialConfirmer) Confirm(ctx context.Context, call tool.Call, text string) (bool, error) {
	select {
	case s.turn <- struct{}{}:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	defer func() { <-s.turn }()
	return s.next.Confirm(ctx, call, text)
}
