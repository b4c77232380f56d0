package modelcall

import (
	"errors"
	"strings"
	"testing"

	"github.com/nbots/nb/provider"
)

// TestReplyArgs: the arguments of the named tool's call are read however
// the model wrote them (an object, a string holding one, a list of one);
// no call, text that is not JSON and JSON that is no object are errors.
func TestReplyArgs(t *testing.T) {
	type args struct {
		Action string `json:"action"`
	}
	for _, c := range []struct {
		calls []provider.ToolCall
		want  string
		err   string
	}{
		{calls: []provider.ToolCall{{Name: "heartbeat", Arguments: `{"action": "run"}`}}, want: "run"},
		{calls: []provider.ToolCall{{Name: "heartbeat", Arguments: `"{\"action\": \"run\"}"`}}, want: "run"},
		{calls: []provider.ToolCall{{Name: "heartbeat", Arguments: `[{"action": "run"}]`}}, want: "run"},
		{calls: []provider.ToolCall{{Name: "other", Arguments: `{"action": "skip"}`}, {Name: "heartbeat", Arguments: `{"action": "run"}`}}, want: "run"},
		{calls: []provider.ToolCall{{Name: "other", Arguments: `{"action": "skip"}`}}, want: "skip"},
		{calls: nil, err: "called no tool"},
		{calls: []provider.ToolCall{{Name: "heartbeat", Arguments: `{"action":`}}, err: "heartbeat arguments are not JSON"},
		{calls: []provider.ToolCall{{Name: "heartbeat", Arguments: `"run"`}}, err: "heartbeat arguments are not JSON"},
		{calls: []provider.ToolCall{{Name: "heartbeat", Arguments: `42`}}, err: "heartbeat arguments are not an object"},
		{calls: []provider.ToolCall{{Name: "heartbeat", Arguments: `[]`}}, err: "heartbeat arguments are not an object"},
	} {
		var a args
		err := Reply{ToolCalls: c.calls}.Args("heartbeat", &a)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%v: error %v, want %q", c.calls, err, c.err)
			}
			if c.calls == nil && !errors.Is(err, ErrNoCall) {
				t.Errorf("no call: %v is not ErrNoCall", err)
			}
			continue
		}
		if err != nil || a.Action != c.want {
			t.Errorf("%v: %q, %v; want %q", c.calls, a.Action, err, c.want)
		}
	}
}
