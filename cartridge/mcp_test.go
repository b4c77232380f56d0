package cartridge

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestMCP(t *testing.T) {
	env := func(name string) (string, bool) {
		switch name {
		case "SEARCH_TOKEN":
			return "s3cret", true
		case "NOTES":
			return "/srv/notes", true
		}
		return "", false
	}
	src := `provider: {id: openai}
mcp:
  files:
    command: npx
    args: [-y, "@modelcontextprotocol/server-filesystem", ENV/NOTES, 3]
    env: {LOG_LEVEL: warn}
    tools: [read_text_file, list_directory]
    timeout: 2.5
  search:
    url: https://mcp.example.com/mcp
    headers: {Authorization: Bearer ENV/SEARCH_TOKEN, X-Plain: ENV/SEARCH_TOKEN}
  legacy:
    url: https://old.example.com/sse
    type: sse
    tools: ["*"]
  none:
    command: ./server
    tools: []
    disabled: true
`
	c, err := Parse([]byte(src), "bot.yml", FormatYAML, env)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("warnings for a cartridge with an mcp key: %v", c.Warnings)
	}
	got, err := c.MCP(env)
	if err != nil {
		t.Fatal(err)
	}
	want := []MCPServer{
		{Name: "files", Prefix: "files", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/srv/notes", "3"},
			Env: map[string]string{"LOG_LEVEL": "warn"}, Transport: "stdio", Tools: []string{"read_text_file", "list_directory"},
			Timeout: 2500 * time.Millisecond, Display: "npx -y @modelcontextprotocol/server-filesystem ENV/NOTES 3", File: "bot.yml", Line: 3},
		{Name: "search", Prefix: "search", URL: "https://mcp.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer s3cret", "X-Plain": "s3cret"},
			Timeout: DefaultMCPTimeout, Display: "https://mcp.example.com/mcp", File: "bot.yml", Line: 9},
		{Name: "legacy", Prefix: "legacy", URL: "https://old.example.com/sse", Transport: "sse", Timeout: DefaultMCPTimeout,
			Display: "https://old.example.com/sse", File: "bot.yml", Line: 12},
		{Name: "none", Prefix: "none", Command: "./server", Transport: "stdio", Tools: []string{}, Disabled: true, Timeout: DefaultMCPTimeout,
			Display: "./server", File: "bot.yml", Line: 16},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("servers (-want +got):\n%s", diff)
	}
	if w := got[0].Where(); w != "bot.yml:3" {
		t.Errorf("Where() = %q", w)
	}
}

func TestMCPMissingEnv(t *testing.T) {
	src := `mcp:
  search:
    url: https://mcp.example.com/mcp
    headers: {Authorization: Bearer ENV/SEARCH_TOKEN}
  files:
    command: ENV/FS_SERVER
`
	c, err := Parse([]byte(src), "bot.yml", FormatYAML, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.MCP(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("got %d servers", len(got))
	}
	if diff := cmp.Diff([]EnvRef{{Path: "mcp.search.headers.Authorization", Var: "SEARCH_TOKEN"}}, got[0].Missing); diff != "" {
		t.Errorf("search: missing (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]EnvRef{{Path: "mcp.files.command", Var: "FS_SERVER"}}, got[1].Missing); diff != "" {
		t.Errorf("files: missing (-want +got):\n%s", diff)
	}
	if got[1].Display != "ENV/FS_SERVER" {
		t.Errorf("display = %q, want the reference's name", got[1].Display)
	}
}

func TestMCPErrors(t *testing.T) {
	tests := []struct{ src, want string }{
		{"mcp: [a]", "bot.yml:1: mcp: must be a mapping"},
		{"mcp:\n  x: {command: a, url: http://b}", "bot.yml:2: mcp.x: has both command and url"},
		{"mcp:\n  x: {}", "bot.yml:2: mcp.x: needs command"},
		{"mcp:\n  x: text", "bot.yml:2: mcp.x: must be a mapping"},
		{"mcp:\n  x:\n    command: a\n    arg: [b]", "bot.yml:4: mcp.x.arg: unknown key"},
		{"mcp:\n  x:\n    command: a\n    args: b", "bot.yml:4: mcp.x.args: must be a list"},
		{"mcp:\n  x:\n    command: a\n    args: [[b]]", "bot.yml:4: mcp.x.args[0]: must be text"},
		{"mcp:\n  x:\n    command: a\n    env: [A=b]", "bot.yml:4: mcp.x.env: must be a mapping"},
		{"mcp:\n  x:\n    command: a\n    env:\n      A: {b: c}", "bot.yml:5: mcp.x.env.A: must be text"},
		{"mcp:\n  x:\n    command: a\n    headers: {A: b}", "bot.yml:4: mcp.x.headers: applies to url servers"},
		{"mcp:\n  x:\n    url: http://a\n    args: [b]", "bot.yml:4: mcp.x.args: applies to command servers"},
		{"mcp:\n  x:\n    url: ftp://a", "bot.yml:3: mcp.x.url: must be an http:// or https:// URL"},
		{"mcp:\n  x:\n    url: http://a\n    type: websocket", "bot.yml:4: mcp.x.type: must be http"},
		{"mcp:\n  x:\n    command: a\n    type: sse", "bot.yml:4: mcp.x.type: must be stdio"},
		{"mcp:\n  x:\n    command: a\n    timeout: 0", "bot.yml:4: mcp.x.timeout: must be a number of seconds above 0"},
		{"mcp:\n  x:\n    command: a\n    timeout: soon", "bot.yml:4: mcp.x.timeout: must be a number"},
		{"mcp:\n  x:\n    command: a\n    tools: read", "bot.yml:4: mcp.x.tools: must be a list"},
		{"mcp:\n  x:\n    command: a\n    tools: [1]", "bot.yml:4: mcp.x.tools[0]: must be a tool name"},
		{"mcp:\n  x:\n    command: a\n    disabled: yes please", "bot.yml:4: mcp.x.disabled: must be true or false"},
		{"mcp:\n  x:\n    command: \"\"", "bot.yml:3: mcp.x.command: must name a program"},
	}
	for _, tt := range tests {
		c, err := Parse([]byte(tt.src), "bot.yml", FormatYAML, nil)
		if err != nil {
			t.Errorf("%q: load: %v", tt.src, err)
			continue
		}
		_, err = c.MCP(nil)
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("%q:\n got %v\nwant %s...", tt.src, err, tt.want)
		}
	}
}

func TestMCPMarkdownOrder(t *testing.T) {
	src := "# Bot\n\n```yaml\nmcp:\n  zeta: {command: z}\n  alpha: {url: https://a.example/mcp}\n```\n"
	c, err := Parse([]byte(src), "bot.md", FormatMarkdown, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.MCP(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "zeta" || got[1].Name != "alpha" {
		t.Fatalf("servers not in file order: %+v", got)
	}
	if got[0].Line != 5 {
		t.Errorf("zeta's line = %d, want 5", got[0].Line)
	}
}

// Server names as users paste them from registries are accepted; their
// tools' prefix is valid, stable and unique in the cartridge.
func TestMCPServerNames(t *testing.T) {
	src := "mcp:\n" +
		"  io.github.someone/server-x: {command: a}\n" +
		"  docs.example: {command: a}\n" +
		"  docs_example: {command: a}\n" +
		"  files: {command: a}\n" +
		"  a__b: {command: a}\n" +
		"  \"..\": {command: a}\n"
	c, err := Parse([]byte(src), "bot.yml", FormatYAML, nil)
	if err != nil {
		t.Fatal(err)
	}
	servers, err := c.MCP(nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, s := range servers {
		got[s.Name] = s.Prefix
	}
	sum := sha256.Sum256([]byte("docs.example"))
	want := map[string]string{
		"io.github.someone/server-x": "io_github_someone_server-x",
		"docs_example":               "docs_example", // valid: its own prefix, whatever comes first
		"docs.example":               "docs_example_" + hex.EncodeToString(sum[:3]),
		"files":                      "files",
		"a__b":                       "a_b",
		"..":                         "mcp",
	}
	for name, prefix := range want {
		if got[name] != prefix {
			t.Errorf("%q: prefix %q, want %q", name, got[name], prefix)
		}
	}
}
