package agent

import (
	"context"
	"fmt"
	"sync"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/tool"
)

// callTool runs one call outside a provider's tool round (a ReAct
// action, a planner's task) the way a round runs each of its calls:
// look the tool up, validate the arguments, ask the Confirmer when the
// cartridge's tools are confirmable and the tool is not read-only, show
// the feedback, emit ToolStart and ToolEnd, contain a panic. It returns
// the output as the model should see it (truncated to the tool's
// limits) and whether it reports a failure. An error stops the exchange:
// the context ended, or the user stopped it at a confirmation.
func (a *Agent) callTool(ctx context.Context, call tool.Call) (string, bool, error) {
	if call.Arguments == nil {
		call.Arguments = map[string]any{}
	}
	j := &job{call: call, args: compactArgs(call.Arguments)}
	failed := func(msg string) (string, bool, error) {
		c := j.call
		a.emit(Event{Kind: ToolStart, Call: &c})
		a.emit(Event{Kind: ToolEnd, Call: &c, Output: msg, IsError: true})
		return msg, true, nil
	}
	t, ok := a.Tools.Lookup(call.Name)
	if !ok {
		return failed(fmt.Sprintf("Unknown tool: %s. The available tools are: %s.", call.Name, a.toolNames()))
	}
	j.tool = t
	if msg := validateArguments(t.Spec(), call.Arguments); msg != "" {
		return failed(msg)
	}
	if a.Cartridge.Confirmable() && !readOnly(t) {
		allowed, err := a.confirm(ctx, j)
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			return "", false, err
		}
		if !allowed {
			return DenialText, true, nil
		}
	}
	a.feedback(ctx, cartridge.Executing, j, nil)
	c := j.call
	a.emit(Event{Kind: ToolStart, Call: &c})
	var live sync.Mutex
	a.execute(ctx, j, &live)
	if err := ctx.Err(); err != nil {
		return "", false, err
	}
	a.feedback(ctx, cartridge.Responding, j, j.result)
	a.emit(Event{Kind: ToolEnd, Call: &c, Output: j.result, IsError: j.isError})
	return a.limitsFor(call.Name).Apply(Text(j.result)), j.isError, nil
}

// compactArgs is the arguments as compact JSON, for feedback.
func compactArgs(args map[string]any) string {
	s := Text(args)
	if s == "" || s == "null" {
		return "{}"
	}
	return s
}
