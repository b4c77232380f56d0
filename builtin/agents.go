package builtin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/builtin/internal/arg"
	"github.com/nbots/nb/tool"
)

// Agents runs the managed sub-agents of one exchange: sub-agents that
// work in the background while their parent goes on, which it can steer,
// wait for and close (the attractor agent-loop specification's subagent
// tools). The runtime implements it, as it does SpawnFunc; the tools
// below only read their arguments and call it.
type Agents interface {
	// Start starts a sub-agent on req in the background and returns its
	// id at once.
	Start(ctx context.Context, req AgentRequest) (id string, err error)
	// Send gives a sub-agent a message: steering while it works, the
	// next turn of its conversation once it has answered.
	Send(id, message string) (AgentStatus, error)
	// Wait waits until every sub-agent of ids has answered (or failed,
	// or was closed), or timeout passed (0: no limit but ctx's), and
	// says where each is.
	Wait(ctx context.Context, ids []string, timeout time.Duration) ([]AgentStatus, error)
	// Close stops a sub-agent (its running commands with it) and says
	// where it ended.
	Close(id string) (AgentStatus, error)
}

// AgentRequest is what spawn_agent asks for.
type AgentRequest struct {
	// Task is the sub-agent's first message.
	Task string
	// Tools name the tools it may use (empty: all of its parent's).
	Tools []string
	// WorkingDir is its workspace, a folder under its parent's, relative
	// to it ("" for the parent's own).
	WorkingDir string
	// Model is the model it uses ("" for its parent's), of the same
	// provider.
	Model string
	// MaxTurns bounds its rounds (0: the cartridge's limit).
	MaxTurns int
	// Depth is its depth (1 for a sub-agent of the cartridge's own bot).
	Depth int
}

// The states of a managed sub-agent (AgentStatus.Status).
const (
	AgentRunning   = "running"
	AgentCompleted = "completed"
	AgentFailed    = "failed"
	AgentClosed    = "closed"
)

// AgentStatus says where a managed sub-agent is: what the tools answer.
type AgentStatus struct {
	ID     string `json:"agent_id"`
	Status string `json:"status"`
	// Output is its last answer (completed), or what stopped it.
	Output string `json:"output,omitempty"`
	// Success is true when it answered.
	Success bool `json:"success"`
	// TurnsUsed counts its rounds so far.
	TurnsUsed int    `json:"turns_used"`
	Model     string `json:"model,omitempty"`
	// WorkingDir is its workspace, relative to its parent's.
	WorkingDir string `json:"working_dir,omitempty"`
}

// maxWait bounds one wait call: the model waits again for a longer task.
const maxWait = time.Hour

// AgentTools returns the managed sub-agent tools (spawn_agent,
// send_input, wait, close_agent) of a bot at depth, run by agents.
// models are the models a sub-agent may be given (empty: any of the
// provider's).
func AgentTools(agents Agents, depth int, models []string) []tool.Tool {
	return []tool.Tool{
		&spawnAgentTool{agents: agents, depth: depth, models: models},
		&sendInputTool{agents: agents},
		&waitTool{agents: agents},
		&closeAgentTool{agents: agents},
	}
}

// AgentToolNames are the names of the managed sub-agent tools.
var AgentToolNames = []string{"spawn_agent", "send_input", "wait", "close_agent"}

type spawnAgentTool struct {
	agents Agents
	depth  int
	models []string
}

func (t *spawnAgentTool) Spec() tool.Spec {
	model := map[string]any{"type": "string", "description": "The model it uses, of the same provider as yours (default: yours): a cheaper one for a simple task."}
	if len(t.models) > 0 {
		model["enum"] = slices.Clone(t.models)
		model["description"] = "The model it uses, of the same provider as yours (default: yours): " + strings.Join(t.models, ", ") + "."
	}
	return tool.Spec{
		Name: "spawn_agent",
		Description: "Start a sub-agent on a self-contained task in the background and get its id at once; it works alone with the tools you list (all of yours when you list none). " +
			"Give it everything it needs in the task: it does not see this conversation. Then go on with your own work, steer it with send_input, collect its answer with wait, and stop it with close_agent.",
		Parameters: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"task":        map[string]any{"type": "string", "description": "The task, complete: what to do, where, and what to answer."},
				"tools":       map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "The names of the tools the sub-agent may use (default: all of yours)."},
				"working_dir": map[string]any{"type": "string", "description": "Its workspace: a folder inside yours, relative to it (default: yours)."},
				"model":       model,
				"max_turns":   map[string]any{"type": "integer", "minimum": 0, "description": "The most rounds of tool calls it may make (default: the same limit as yours)."},
			},
			"required": []any{"task"},
		},
	}
}

func (t *spawnAgentTool) Run(ctx context.Context, call tool.Call) (any, error) {
	task, tools, err := taskArguments(call)
	if err != nil {
		return nil, err
	}
	dir, err := arg.String(call.Arguments, "working_dir", false)
	if err != nil {
		return nil, err
	}
	model, err := arg.String(call.Arguments, "model", false)
	if err != nil {
		return nil, err
	}
	model = strings.TrimSpace(model)
	if model != "" && len(t.models) > 0 && !slices.Contains(t.models, model) {
		return nil, fmt.Errorf("the model %q is not one a sub-agent may use here: %s", model, strings.Join(t.models, ", "))
	}
	turns, err := arg.Int(call.Arguments, "max_turns", 0, 0, 10_000)
	if err != nil {
		return nil, err
	}
	id, err := t.agents.Start(ctx, AgentRequest{Task: task, Tools: tools, WorkingDir: strings.TrimSpace(dir), Model: model, MaxTurns: turns, Depth: t.depth + 1})
	if err != nil {
		return nil, err
	}
	return map[string]any{"agent_id": id, "status": AgentRunning}, nil
}

type sendInputTool struct{ agents Agents }

func (t *sendInputTool) Spec() tool.Spec {
	return tool.Spec{
		Name:        "send_input",
		Description: "Send a message to a sub-agent you started: while it works, it reads the message after its current step; once it has answered, the message starts its next turn.",
		Parameters:  sendInputParams(),
	}
}

// sendInputParams is send_input's schema, built once on first use: a spec's Parameters are read-only
// (tool.Spec), and a turn asks every tool for its spec.
var sendInputParams = sync.OnceValue(func() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"agent_id": map[string]any{"type": "string", "description": "The id spawn_agent gave."},
			"message":  map[string]any{"type": "string", "description": "What to tell it."},
		},
		"required": []any{"agent_id", "message"},
	}
})

func (t *sendInputTool) Run(ctx context.Context, call tool.Call) (any, error) {
	id, err := arg.String(call.Arguments, "agent_id", true)
	if err != nil {
		return nil, err
	}
	msg, err := arg.String(call.Arguments, "message", true)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(msg) == "" {
		return nil, errors.New("the message is empty")
	}
	return t.agents.Send(id, msg)
}

type waitTool struct{ agents Agents }

func (t *waitTool) Spec() tool.Spec {
	return tool.Spec{
		Name:        "wait",
		Description: "Wait for sub-agents you started to answer, and get their answers: {agent_id, status, output, success, turns_used} each. With a timeout, the ones still running say so.",
		Parameters:  waitParams(),
	}
}

// waitParams is wait's schema, built once on first use: a spec's Parameters are read-only
// (tool.Spec), and a turn asks every tool for its spec.
var waitParams = sync.OnceValue(func() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"agent_id":  map[string]any{"type": "string", "description": "The id of one sub-agent."},
			"agent_ids": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "The ids of several sub-agents: wait for all of them."},
			"timeout":   map[string]any{"type": "integer", "minimum": 0, "maximum": 3600, "description": "The most seconds to wait (default: until they answer; at most an hour)."},
		},
	}
})

// ReadOnly: waiting changes nothing, so it needs no confirmation.
func (t *waitTool) ReadOnly() bool { return true }

// Repeatable: a model waits longer by calling wait again with the same
// arguments; the loop detector leaves it out (see agent.Repeatable).
func (t *waitTool) Repeatable() bool { return true }

func (t *waitTool) Run(ctx context.Context, call tool.Call) (any, error) {
	one, err := arg.String(call.Arguments, "agent_id", false)
	if err != nil {
		return nil, err
	}
	ids, err := arg.Strings(call.Arguments, "agent_ids")
	if err != nil {
		return nil, err
	}
	if one != "" {
		ids = append([]string{one}, ids...)
	}
	if len(ids) == 0 {
		return nil, errors.New("name the sub-agents to wait for: agent_id or agent_ids")
	}
	secs, err := arg.Int(call.Arguments, "timeout", 0, 0, int(maxWait/time.Second))
	if err != nil {
		return nil, err
	}
	timeout := time.Duration(secs) * time.Second
	if secs == 0 {
		timeout = maxWait
	}
	st, err := t.agents.Wait(ctx, ids, timeout)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if len(st) == 1 {
		return st[0], nil
	}
	return st, nil
}

type closeAgentTool struct{ agents Agents }

func (t *closeAgentTool) Spec() tool.Spec {
	return tool.Spec{
		Name:        "close_agent",
		Description: "Stop a sub-agent you started (and the commands it runs) and get where it ended.",
		Parameters:  closeAgentParams(),
	}
}

// closeAgentParams is close_agent's schema, built once on first use: a spec's Parameters are read-only
// (tool.Spec), and a turn asks every tool for its spec.
var closeAgentParams = sync.OnceValue(func() map[string]any {
	return map[string]any{
		"type":       "object",
		"properties": map[string]any{"agent_id": map[string]any{"type": "string", "description": "The id spawn_agent gave."}},
		"required":   []any{"agent_id"},
	}
})

func (t *closeAgentTool) Run(ctx context.Context, call tool.Call) (any, error) {
	id, err := arg.String(call.Arguments, "agent_id", true)
	if err != nil {
		return nil, err
	}
	return t.agents.Close(id)
}

// OutputLimits: a sub-agent's answer, as spawn's.
func (t *spawnAgentTool) OutputLimits() tool.Limits { return tool.Limits{Chars: 20_000} }
func (t *waitTool) OutputLimits() tool.Limits       { return tool.Limits{Chars: 20_000} }
func (t *closeAgentTool) OutputLimits() tool.Limits { return tool.Limits{Chars: 20_000} }
