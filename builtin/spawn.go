package builtin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/nbots/nb/builtin/internal/arg"
	"github.com/nbots/nb/tool"
)

// spawnTool runs a sub-agent through the runtime's SpawnFunc.
type spawnTool struct {
	run   SpawnFunc
	depth int // the depth of the bot that holds the tool
}

func (t *spawnTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "spawn",
		Description: "Hand a self-contained task to a sub-agent, which works on it alone with the tools you list (all of yours when you list none) " +
			"and returns its final answer. Give it everything it needs in the task: it does not see this conversation.",
		Parameters: spawnParams(),
	}
}

// spawnParams is spawn's schema, built once on first use: a spec's Parameters are read-only
// (tool.Spec), and a turn asks every tool for its spec.
var spawnParams = sync.OnceValue(func() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"task":  map[string]any{"type": "string", "description": "The task, complete: what to do, where, and what to answer."},
			"tools": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "The names of the tools the sub-agent may use (default: all of yours)."},
		},
		"required": []any{"task"},
	}
})

// OutputLimits: the attractor's spawn_agent limit.
func (t *spawnTool) OutputLimits() tool.Limits { return tool.Limits{Chars: 20_000} }

func (t *spawnTool) Run(ctx context.Context, call tool.Call) (any, error) {
	task, tools, err := taskArguments(call)
	if err != nil {
		return nil, err
	}
	answer, err := t.run(ctx, task, tools, t.depth+1)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("the sub-agent failed: %v", err)
	}
	if strings.TrimSpace(answer) == "" {
		return "(The sub-agent finished without an answer.)", nil
	}
	return answer, nil
}

// taskArguments reads the task and tools of a sub-agent's start
// (spawn's, spawn_agent's).
func taskArguments(call tool.Call) (task string, tools []string, err error) {
	task, err = arg.String(call.Arguments, "task", true)
	if err != nil {
		return "", nil, err
	}
	if strings.TrimSpace(task) == "" {
		return "", nil, errors.New("the task is empty: say what the sub-agent should do")
	}
	tools, err = arg.Strings(call.Arguments, "tools")
	return task, tools, err
}

// SpawnTool returns a spawn tool that runs sub-agents with run, for a bot
// at depth (its sub-agents are at depth+1). A runtime uses it to bind
// spawn to one exchange, replacing the one FromCartridge built.
func SpawnTool(run SpawnFunc, depth int) tool.Tool { return &spawnTool{run: run, depth: depth} }
