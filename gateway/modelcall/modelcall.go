// Package modelcall is the one model call, without an agent loop, that the
// gateway's background features make: memory consolidation asks for a
// save_memory call, the heartbeat for a heartbeat decision, the
// notification gate for its verdict. They take a
// Caller; the gateway implements it with its bot, so that these packages
// know neither cartridges nor providers' APIs.
package modelcall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/tool"
)

// Request is one call: a system text, one user message, the tools offered.
type Request struct {
	// Source names who calls, for the token ledger: "consolidation",
	// "heartbeat".
	Source string
	// Session is the session the call is for ("heartbeat", "telegram:42"),
	// for the budget.
	Session string
	System  string
	User    string
	Tools   []tool.Spec
	// ToolChoice names the tool the model must call; "" lets it choose.
	// A Caller whose provider refuses a forced choice retries with "".
	ToolChoice string
}

// Reply is the model's answer.
type Reply struct {
	Content string
	// ToolCalls are the calls as the model sent them: their Arguments may be
	// anything (malformed JSON, a list, a string holding JSON).
	ToolCalls []provider.ToolCall
	// FinishReason is the provider's, mapped to provider's constants.
	FinishReason string
	Usage        provider.Usage
}

// Caller makes one call.
type Caller interface {
	Call(ctx context.Context, req Request) (Reply, error)
}

// Func is a function as a Caller.
type Func func(ctx context.Context, req Request) (Reply, error)

// Call calls f.
func (f Func) Call(ctx context.Context, req Request) (Reply, error) { return f(ctx, req) }

// Provider is a Caller on a provider (the assistant's bot's, with its
// retries): one Complete with the system text, the user message and the
// tools, the call forced to ToolChoice on the APIs that can force one.
// When the server refuses the forced choice (an error that names
// tool_choice, or says it "does not support" it: nanobot's markers), the
// call is made again without one, the model choosing, as nanobot falls
// back to "auto".
func Provider(p provider.Provider) Caller {
	return Func(func(ctx context.Context, req Request) (Reply, error) {
		preq := provider.Request{
			System:     req.System,
			Messages:   []provider.Message{{Role: provider.RoleUser, Content: req.User}},
			Tools:      req.Tools,
			ToolChoice: req.ToolChoice,
		}
		resp, err := p.Complete(ctx, preq, nil)
		if err != nil && preq.ToolChoice != "" && ToolChoiceRefused(err) {
			preq.ToolChoice = ""
			resp, err = p.Complete(ctx, preq, nil)
		}
		if err != nil {
			return Reply{}, err
		}
		return Reply{Content: resp.Text, ToolCalls: resp.ToolCalls, FinishReason: resp.FinishReason, Usage: resp.Usage}, nil
	})
}

// ToolChoiceRefused tells an error of a server that refuses a forced
// tool choice, by nanobot's markers.
func ToolChoiceRefused(err error) bool {
	text := strings.ToLower(err.Error())
	for _, m := range []string{"tool_choice", "toolchoice", "does not support", `should be ["none", "auto"]`} {
		if strings.Contains(text, m) {
			return true
		}
	}
	return false
}

// ErrNoCall is Reply.Args's error when the model called no tool.
var ErrNoCall = errors.New("the model called no tool")

// Args decodes into v the arguments of the reply's call of the tool
// name (its first call when none is of that name), however the model
// wrote them: a JSON object, a JSON string holding one, or a list whose
// first item is one. With no call at all it returns ErrNoCall.
func (r Reply) Args(name string, v any) error {
	if len(r.ToolCalls) == 0 {
		return ErrNoCall
	}
	call := r.ToolCalls[0]
	for _, tc := range r.ToolCalls {
		if tc.Name == name {
			call = tc
			break
		}
	}
	raw := []byte(call.Arguments)
	var inner string
	if json.Unmarshal(raw, &inner) == nil { // JSON inside a string
		raw = []byte(inner)
	}
	if !json.Valid(raw) {
		return fmt.Errorf("%s arguments are not JSON: %v", name, json.Unmarshal(raw, new(any)))
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) == nil && len(list) > 0 {
		raw = list[0]
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return fmt.Errorf("%s arguments are not an object", name)
	}
	return json.Unmarshal(raw, v)
}
