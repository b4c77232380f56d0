package providertest

import (
	"context"
	"testing"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/tool"
)

// CheckEchoToolRound checks that a provider talking to its fake answering
// with Echo goes through a whole tool round with two calls, streamed and
// not, as the end-to-end tests rely on. newProvider returns a provider
// connected to a fresh fake whose brain is Echo.
func CheckEchoToolRound(t *testing.T, newProvider func(t *testing.T) provider.Provider) {
	t.Helper()
	for _, stream := range []bool{true, false} {
		p := newProvider(t)
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
