package bot

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/provider/providertest"
)

// mcpServer serves an MCP server with a ping tool over streamable HTTP.
func mcpServer(t *testing.T) string {
	t.Helper()
	s := sdk.NewServer(&sdk.Implementation{Name: "pinger", Version: "1.0"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "ping", Description: "Answers pong."}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "pong"}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "shadowed", Description: "Loses to the cartridge's tool."}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "from the server"}}}, nil, nil
	})
	hs := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	return hs.URL
}

// The MCP servers of the mcp key give the bot their tools, behind the
// cartridge's own, on hosts that allow them.
func TestMCPTools(t *testing.T) {
	url := fakeOpenAI(t, providertest.Echo)
	c := cartridgeFor(t, url, `mcp:
  local: {url: `+mcpServer(t)+`}
tools:
  - name: local__shadowed
    lua: return "from the cartridge"
`)
	if _, err := New(context.Background(), c, Host{}); err == nil || !strings.Contains(err.Error(), "bot.yml:6: mcp: this host does not start MCP servers") {
		t.Fatalf("a host that does not allow MCP: %v", err)
	}
	var warnings []string
	b, err := New(context.Background(), c, Host{AllowMCP: true, Warn: func(m string) { warnings = append(warnings, m) }})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for msg, want := range map[string]string{
		"call local__ping {}":     "tool local__ping said: pong",
		"call local__shadowed {}": "tool local__shadowed said: from the cartridge",
	} {
		res, err := b.Ask(context.Background(), Exchange{Mode: cartridge.Eval}, msg)
		if err != nil || res.Text != want {
			t.Errorf("%s: %v, %v", msg, res, err)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "the MCP tool local__shadowed is not offered: the cartridge has a tool of the same name") {
		t.Errorf("warnings: %q", warnings)
	}
	st := b.MCP()
	if len(st) != 1 || st[0].Server != "pinger 1.0" || len(st[0].Tools) != 2 || st[0].Tools[0].Name != "local__ping" || st[0].Tools[1].Name != "" {
		t.Errorf("status: %+v", st)
	}
}
