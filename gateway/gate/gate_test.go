package gate

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nbots/nb/gateway/modelcall"
	"github.com/nbots/nb/provider"
)

func TestNotify(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply modelcall.Reply
		err   error
		want  bool
	}{
		{"suppress", modelcall.Reply{ToolCalls: []provider.ToolCall{{Name: "evaluate_notification", Arguments: `{"should_notify": false, "reason": "routine"}`}}}, nil, false},
		{"notify", modelcall.Reply{ToolCalls: []provider.ToolCall{{Name: "evaluate_notification", Arguments: `{"should_notify": true}`}}}, nil, true},
		{"no call", modelcall.Reply{Content: "echo: ..."}, nil, true},
		{"no should_notify", modelcall.Reply{ToolCalls: []provider.ToolCall{{Name: "evaluate_notification", Arguments: `{"reason": "?"}`}}}, nil, true},
		{"call failed", modelcall.Reply{}, errors.New("503"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got modelcall.Request
			g := &Gate{Model: modelcall.Func(func(_ context.Context, r modelcall.Request) (modelcall.Reply, error) {
				got = r
				return tc.reply, tc.err
			})}
			if n := g.Notify(context.Background(), "cron", "cron:ab12", "check the server", "all normal"); n != tc.want {
				t.Errorf("notify %v, want %v", n, tc.want)
			}
			if got.System != System || got.User != "## Original task\ncheck the server\n\n## Agent response\nall normal" ||
				len(got.Tools) != 1 || got.Tools[0].Name != "evaluate_notification" || got.Source != "cron" || got.Session != "cron:ab12" {
				t.Errorf("request %+v", got)
			}
			if !strings.HasPrefix(got.System, "You are a notification gate for a background agent.") {
				t.Errorf("system %q", got.System)
			}
		})
	}
}
