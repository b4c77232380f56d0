// Package gate decides, as nanobot's evaluate_response does, whether the
// answer of a background run (a cron job, a heartbeat beat) is worth a
// message to the user: one small model call offered a single tool,
// evaluate_notification, whose should_notify is the decision. Any
// failure (the call, no tool call, arguments that cannot be read) lets
// the message through: an important one is never dropped silently.
package gate

import (
	"context"
	"errors"
	"log/slog"

	"github.com/nbots/nb/gateway/modelcall"
	"github.com/nbots/nb/tool"
)

// Tool is nanobot's evaluate_notification tool.
var Tool = tool.Spec{
	Name:        "evaluate_notification",
	Description: "Decide whether the user should be notified about this background task result.",
	Parameters: map[string]any{
		"type": "object",
		"properties": map[string]any{
			"should_notify": map[string]any{
				"type":        "boolean",
				"description": "true = result contains actionable/important info the user should see; false = routine or empty, safe to suppress",
			},
			"reason": map[string]any{
				"type":        "string",
				"description": "One-sentence reason for the decision",
			},
		},
		"required": []any{"should_notify"},
	},
}

// System is nanobot's system prompt of the gate.
const System = "You are a notification gate for a background agent. " +
	"You will be given the original task and the agent's response. " +
	"Call the evaluate_notification tool to decide whether the user " +
	"should be notified.\n\n" +
	"Notify when the response contains actionable information, errors, " +
	"completed deliverables, or anything the user explicitly asked to " +
	"be reminded about.\n\n" +
	"Suppress when the response is a routine status check with nothing " +
	"new, a confirmation that everything is normal, or essentially empty."

// Gate asks its Model whether a background answer goes to the user.
type Gate struct {
	Model modelcall.Caller
	// Log receives the decision and its reason; nil discards.
	Log *slog.Logger
}

// Notify reports whether response, the answer to task run in session
// by source ("cron", "heartbeat": the budget's), should be sent: true
// unless the model says false.
func (g *Gate) Notify(ctx context.Context, source, session, task, response string) bool {
	if g == nil || g.Model == nil {
		return true
	}
	log := g.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	reply, err := g.Model.Call(ctx, modelcall.Request{
		Source:  source,
		Session: session,
		System:  System,
		User:    "## Original task\n" + task + "\n\n## Agent response\n" + response,
		Tools:   []tool.Spec{Tool},
	})
	if err != nil {
		log.Warn("notification gate failed: notifying", "session", session, "error", err)
		return true
	}
	var args struct {
		ShouldNotify *bool `json:"should_notify"`
		Reason       any   `json:"reason"`
	}
	if err := reply.Args(Tool.Name, &args); errors.Is(err, modelcall.ErrNoCall) {
		log.Warn("notification gate: no tool call returned: notifying", "session", session)
		return true
	} else if err != nil || args.ShouldNotify == nil {
		log.Warn("notification gate: no should_notify in the model's call: notifying", "session", session)
		return true
	}
	log.Info("notification gate", "session", session, "should_notify", *args.ShouldNotify, "reason", args.Reason)
	return *args.ShouldNotify
}
