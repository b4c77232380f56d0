package main

import (
	"context"

	"github.com/nbots/nb/term"
	"github.com/nbots/nb/tool"
)

// approvedTools runs the tool calls approved from the shell (--yes,
// --allow-tool) and denies the others, asking nobody: nb gateway chat's
// turns, where the terminal's lines are messages.
type approvedTools struct{ approval *term.Approval }

func (c approvedTools) Confirm(_ context.Context, call tool.Call, _ string) (bool, error) {
	return c.approval.Allows(call.Name), nil
}
