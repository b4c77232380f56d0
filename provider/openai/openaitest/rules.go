package openaitest

import (
	"fmt"
	"strings"
)

// RuleError is a request the API refuses with 400 invalid_request_error.
type RuleError struct {
	Message, Param string
}

func (e *RuleError) Error() string { return e.Message }

// CheckToolOrder applies the API's rules on tool messages, with its own
// error texts (the typo "preceeding" is OpenAI's): a tool message must
// answer a call of the assistant message right before the run of tool
// messages it is in, and every call must be answered before the next
// message that is not a tool message.
func CheckToolOrder(req *Request) error {
	var open []string // calls of the last assistant message not yet answered
	inRound := false
	unanswered := func(i int) error {
		if len(open) == 0 {
			return nil
		}
		return &RuleError{
			Message: "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: " + strings.Join(open, ", "),
			Param:   fmt.Sprintf("messages.[%d].role", i),
		}
	}
	for i, m := range req.Messages {
		if m.Role == "tool" {
			found := false
			for j, id := range open {
				if id == m.ToolCallID {
					open = append(open[:j], open[j+1:]...)
					found = true
					break
				}
			}
			if !inRound || !found {
				return &RuleError{
					Message: "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
					Param:   fmt.Sprintf("messages.[%d].role", i),
				}
			}
			continue
		}
		if err := unanswered(i); err != nil {
			return err
		}
		open, inRound = nil, false
		if m.Role == "assistant" && len(m.ToolCalls) > 0 {
			for _, c := range m.ToolCalls {
				open = append(open, c.ID)
			}
			inRound = true
		}
	}
	return unanswered(len(req.Messages))
}
