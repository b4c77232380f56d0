package maritaca_test

import (
	"context"
	"testing"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/tool"
)

// The fake behaves as providertest.Echo does, through a whole tool round
// with two calls, streamed and not: the end-to-end tests rely on it.
func TestEchoToolRound(t *testing.T) {
	for _, stream := range []bool{true, false} {
		p := echoProvider(t)
		tools := []tool.Spec{{Name: "get-weather", Parameters: tool.DefaultParameters()}, {Name: "get-time", Parameters: tool.DefaultParameters()}}
		msgs := []provider.Message{{Role: provider.RoleUser, Content: `call get-weather {"city":"Paris"}; get-time`}}
		resp, err := p.Complete(context.Background(), provider.Request{System: "S", Backdrop: "B", Messages: msgs, Tools: tools, Stream: stream}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.ToolCalls) != 2 || resp.ToolCalls[0].Name != "get-weather" || resp.ToolCalls[0].Arguments != `{"city":"Paris"}` || resp.ToolCalls[1].Name != "get-time" || resp.ToolCalls[1].Arguments != "{}" {
			t.Fatalf("stream=%v calls %+v", stream, resp.ToolCalls)
		}
		msgs = append(msgs, resp.Message())
		for i, c := range resp.ToolCalls {
			msgs = append(msgs, provider.Message{Role: provider.RoleTool, ToolCallID: c.ID, ToolName: c.Name, Content: []string{"sunny", "noon"}[i]})
		}
		resp, err = p.Complete(context.Background(), provider.Request{System: "S", Backdrop: "B", Messages: msgs, Tools: tools, Stream: stream}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if want := "tool get-weather said: sunny; tool get-time said: noon"; resp.Text != want {
			t.Fatalf("stream=%v text %q, want %q", stream, resp.Text, want)
		}
		msgs = append(msgs, resp.Message(), provider.Message{Role: provider.RoleUser, Content: "thanks"})
		resp, err = p.Complete(context.Background(), provider.Request{System: "S", Backdrop: "B", Messages: msgs, Tools: tools, Stream: stream}, nil)
		if err != nil || resp.Text != "echo: thanks" {
			t.Fatalf("stream=%v %+v %v", stream, resp, err)
		}
	}
}

func echoProvider(t *testing.T) provider.Provider {
	p, _ := setup(t, providertest.Echo, nil, nil)
	return p
}
