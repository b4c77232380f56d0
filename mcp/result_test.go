package mcp

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/media"
	"github.com/nbots/nb/tool"
)

func TestResult(t *testing.T) {
	size := int64(12)
	tests := []struct {
		name string
		in   *sdk.CallToolResult
		want *tool.Result
	}{
		{"text blocks", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a"}, &sdk.TextContent{Text: "b"}}},
			&tool.Result{Text: "a\nb"}},
		{"an error", &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "no such file"}}},
			&tool.Result{Text: "no such file", IsError: true}},
		{"an image alone", &sdk.CallToolResult{Content: []sdk.Content{&sdk.ImageContent{MIMEType: "image/png", Data: []byte("png")}}},
			&tool.Result{Images: []media.Image{{MediaType: "image/png", Data: []byte("png")}}}},
		{"audio", &sdk.CallToolResult{Content: []sdk.Content{&sdk.AudioContent{MIMEType: "audio/wav", Data: []byte("wav")}}},
			&tool.Result{Text: "[audio: audio/wav, 3 bytes, not shown]"}},
		{"a resource link", &sdk.CallToolResult{Content: []sdk.Content{&sdk.ResourceLink{URI: "file:///a.txt", Name: "a.txt", MIMEType: "text/plain", Description: "notes", Size: &size}}},
			&tool.Result{Text: "[resource link: file:///a.txt (a.txt), text/plain: notes]"}},
		{"a text resource", &sdk.CallToolResult{Content: []sdk.Content{&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "test://1", MIMEType: "text/plain", Text: "hello"}}}},
			&tool.Result{Text: "[resource test://1]\nhello"}},
		{"an image resource", &sdk.CallToolResult{Content: []sdk.Content{&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "test://2", MIMEType: "image/gif", Blob: []byte("gif")}}}},
			&tool.Result{Text: "[resource test://2: image below]", Images: []media.Image{{MediaType: "image/gif", Data: []byte("gif")}}}},
		{"a binary resource", &sdk.CallToolResult{Content: []sdk.Content{&sdk.EmbeddedResource{Resource: &sdk.ResourceContents{URI: "test://3", Blob: []byte("gz")}}}},
			&tool.Result{Text: "[resource test://3: unknown type, 2 bytes of binary content, not shown]"}},
		{"structured content alone", &sdk.CallToolResult{Content: []sdk.Content{}, StructuredContent: map[string]any{"t": 21}},
			&tool.Result{Text: `{"t":21}`}},
		{"structured content beside text", &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "21 degrees"}}, StructuredContent: map[string]any{"t": 21}},
			&tool.Result{Text: "21 degrees"}},
		{"nothing", &sdk.CallToolResult{}, &tool.Result{Text: "(no output)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Result(tt.in)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// Tool names are unique as tool.MatchName sees them (a tool.Set lets a
// later tool replace an earlier one of the same match name) and valid
// for every provider once tool.Set has made them so.
func TestToolNames(t *testing.T) {
	c := &Clients{}
	add := func(name string, tools ...string) {
		s := &server{c: c, cfg: cartridge.MCPServer{Name: name}}
		for _, x := range tools {
			s.tools = append(s.tools, remoteTool{name: x, schema: map[string]any{"type": "object"}})
		}
		c.servers = append(c.servers, s)
	}
	long := strings.Repeat("very_long_tool_name_", 5)
	add("a_b", "c", "read-file", "read_file", "github.create issue", long)
	add("a", "b_c")
	var set tool.Set
	for _, x := range c.buildTools() {
		set.Add(x)
	}
	var got []string
	for _, s := range set.Specs() {
		got = append(got, s.Name)
	}
	want := []string{"a_b__c", "a_b__read-file", "a_b__read_file_2", "a_b__github_create_issue", tool.ProviderName("a_b__" + long), "a__b_c_2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if set.Len() != 6 {
		t.Errorf("the set kept %d of 6 tools", set.Len())
	}
	for _, n := range got {
		if len(n) > 64 {
			t.Errorf("%s is longer than 64", n)
		}
	}
	// The status shows the names the model sees.
	if st := c.servers[0].status(); st.Tools[3].Name != "a_b__github_create_issue" || st.Tools[3].Remote != "github.create issue" {
		t.Errorf("status: %+v", st.Tools[3])
	}
}
