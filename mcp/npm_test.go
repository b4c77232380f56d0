package mcp

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/internal/npmtest"
	"github.com/nbots/nb/internal/testbuf"
	"github.com/nbots/nb/proc"
)

// everythingTools are the tools @modelcontextprotocol/server-everything
// offers a client without roots, sampling or elicitation (its task-based
// simulate-research-query is offered to every client).
var everythingTools = []string{
	"echo", "get-annotated-message", "get-env", "get-resource-links", "get-resource-reference",
	"get-structured-content", "get-sum", "get-tiny-image", "gzip-file-as-resource",
	"simulate-research-query", "toggle-simulated-logging", "toggle-subscriber-updates", "trigger-long-running-operation",
}

func everythingServer(t *testing.T, mark string) cartridge.MCPServer {
	dir := npmtest.Dir(t, "mcp")
	return cartridge.MCPServer{
		Name: "everything", Command: filepath.Join(dir, "node_modules", ".bin", "mcp-server-everything"), Args: []string{"stdio"},
		Transport: "stdio", Timeout: 10 * time.Second, Display: "mcp-server-everything stdio",
		Env: map[string]string{"NB_MCP_MARK": mark, "EVERYTHING_SETTING": "configured"},
	}
}

func TestEverythingStdio(t *testing.T) {
	mark := uniqueMark(t)
	c := start(t, Options{Servers: []cartridge.MCPServer{everythingServer(t, mark)}})
	st := c.Status()[0]
	if st.State != Running {
		t.Fatalf("status: %+v", st)
	}
	checkEverything(t, c)

	// get-env shows what the program sees: its own variable, not nb's.
	res, err := run(t, findTool(t, c, "everything__get-env"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Text, "EVERYTHING_SETTING") || strings.Contains(res.Text, "hunter2") {
		t.Errorf("get-env:\n%s", res.Text)
	}
	if len(st.Resources) == 0 || len(st.Prompts) == 0 {
		t.Errorf("no resources or prompts listed: %d, %d", len(st.Resources), len(st.Prompts))
	}
	c.Close()
	noLeftovers(t, mark)
}

// checkEverything lists and calls the everything server's tools.
func checkEverything(t *testing.T, c *Clients) {
	t.Helper()
	var got []string
	for _, x := range c.Tools() {
		got = append(got, strings.TrimPrefix(x.Spec().Name, "everything__"))
		if p := x.Spec().Parameters; p["type"] != "object" || p["$schema"] != nil {
			t.Errorf("%s: parameters %v", x.Spec().Name, p)
		}
	}
	sort.Strings(got)
	if strings.Join(got, " ") != strings.Join(everythingTools, " ") {
		t.Errorf("tools:\n got %v\nwant %v", got, everythingTools)
	}
	st := c.Status()[0]
	if len(st.Tools) != len(everythingTools) || st.Tools[0].Name != "everything__"+st.Tools[0].Remote {
		t.Errorf("status tools: %+v", st.Tools)
	}

	res, err := run(t, findTool(t, c, "everything__echo"), map[string]any{"message": "hello"})
	if err != nil || res.Text != "Echo: hello" {
		t.Errorf("echo: %+v, %v", res, err)
	}
	res, err = run(t, findTool(t, c, "everything__get-sum"), map[string]any{"a": 2, "b": 40})
	if err != nil || !strings.Contains(res.Text, "42") {
		t.Errorf("get-sum: %+v, %v", res, err)
	}
	res, err = run(t, findTool(t, c, "everything__get-tiny-image"), nil)
	if err != nil || len(res.Images) != 1 || res.Images[0].MediaType != "image/png" || !bytes.HasPrefix(res.Images[0].Data, []byte("\x89PNG")) {
		t.Errorf("get-tiny-image: %+v, %v", res, err)
	}
	res, err = run(t, findTool(t, c, "everything__get-resource-links"), map[string]any{"count": 2})
	if err != nil || strings.Count(res.Text, "[resource link: ") != 2 {
		t.Errorf("get-resource-links: %+v, %v", res, err)
	}
	res, err = run(t, findTool(t, c, "everything__get-structured-content"), map[string]any{"location": "New York"})
	if err != nil || !strings.Contains(res.Text, "temperature") {
		t.Errorf("get-structured-content: %+v, %v", res, err)
	}

	// Three seconds of work with a one-second timeout: it completes
	// because each progress notification gives the call its time again.
	x := findTool(t, c, "everything__trigger-long-running-operation").(*Tool)
	saved := x.server.cfg.Timeout
	x.server.cfg.Timeout = 1500 * time.Millisecond
	defer func() { x.server.cfg.Timeout = saved }()
	res, err = run(t, x, map[string]any{"duration": 3, "steps": 3})
	if err != nil || !strings.Contains(res.Text, "Long running operation completed") {
		t.Errorf("trigger-long-running-operation: %+v, %v", res, err)
	}
}

// freePort returns a loopback port nothing listens on.
func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// serveEverything runs the everything server over HTTP (transport is
// streamableHttp or sse) and returns its base URL.
func serveEverything(t *testing.T, transport string) string {
	dir := npmtest.Dir(t, "mcp")
	port := freePort(t)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := proc.Command(ctx, filepath.Join(dir, "node_modules", ".bin", "mcp-server-everything"), transport)
	cmd.Env = proc.Env(os.Environ(), nil, fmt.Sprintf("PORT=%d", port))
	var stderr testbuf.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
		proc.Reap(cmd)
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	// node loads the server's modules for seconds, and for more than
	// 20 under CI's load (it said it was running just as a 20 s wait
	// ended); the wait ends as soon as the port answers.
	for deadline := time.Now().Add(60 * time.Second); ; {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			return base
		}
		if time.Now().After(deadline) {
			t.Fatalf("the everything server (%s) did not listen:\n%s", transport, stderr.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestEverythingStreamableHTTP(t *testing.T) {
	base := serveEverything(t, "streamableHttp")
	var seen testbuf.Buffer
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		fmt.Fprintf(&seen, "%s %s %s\n", r.Method, r.URL.Path, r.Header.Get("X-Api-Key"))
		return http.DefaultTransport.RoundTrip(r)
	})}
	s := cartridge.MCPServer{Name: "everything", URL: base + "/mcp", Display: base + "/mcp", Timeout: 10 * time.Second,
		Headers: map[string]string{"X-Api-Key": "k3y"}}
	c := start(t, Options{Servers: []cartridge.MCPServer{s}, HTTPClient: client})
	if st := c.Status()[0]; st.State != Running || st.Transport != "streamable HTTP" {
		t.Fatalf("status: %+v", st)
	}
	checkEverything(t, c)
	if !strings.Contains(seen.String(), "POST /mcp k3y") {
		t.Errorf("the header did not reach the server:\n%s", seen.String())
	}
}

func TestEverythingSSE(t *testing.T) {
	base := serveEverything(t, "sse")
	s := cartridge.MCPServer{Name: "everything", URL: base + "/sse", Display: base + "/sse", Timeout: 10 * time.Second}
	c := start(t, Options{Servers: []cartridge.MCPServer{s}})
	if st := c.Status()[0]; st.State != Running || st.Transport != "SSE" {
		t.Fatalf("status: %+v", st)
	}
	checkEverything(t, c)
}

// A URL that does not say /sse is tried with streamable HTTP first, then
// with the legacy SSE transport, as the MCP specification advises.
func TestSSEFallback(t *testing.T) {
	server := sdk.NewServer(&sdk.Implementation{Name: "legacy", Version: "0.1"}, nil)
	sdk.AddTool(server, &sdk.Tool{Name: "ping"}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "pong"}}}, nil, nil
	})
	mux := http.NewServeMux()
	mux.Handle("/events", sdk.NewSSEHandler(func(*http.Request) *sdk.Server { return server }, nil))
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close) // after the clients' Close, registered later
	s := cartridge.MCPServer{Name: "legacy", URL: hs.URL + "/events", Display: hs.URL + "/events", Timeout: 5 * time.Second}
	c := start(t, Options{Servers: []cartridge.MCPServer{s}})
	if st := c.Status()[0]; st.State != Running || st.Transport != "SSE" {
		t.Fatalf("status: %+v", st)
	}
	res, err := run(t, findTool(t, c, "legacy__ping"), nil)
	if err != nil || res.Text != "pong" {
		t.Errorf("ping: %+v, %v", res, err)
	}
}

func TestFilesystemServer(t *testing.T) {
	dir := npmtest.Dir(t, "mcp")
	mark := uniqueMark(t)
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "notes.txt"), []byte("buy milk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := cartridge.MCPServer{
		Name: "files", Command: filepath.Join(dir, "node_modules", ".bin", "mcp-server-filesystem"), Args: []string{root},
		Transport: "stdio", Timeout: 10 * time.Second, Display: "mcp-server-filesystem " + root,
		Env: map[string]string{"NB_MCP_MARK": mark}, Tools: []string{"read_text_file", "list_directory"},
	}
	c := start(t, Options{Servers: []cartridge.MCPServer{s}})
	if st := c.Status()[0]; st.State != Running || len(st.Tools) != 2 || len(st.Hidden) == 0 {
		t.Fatalf("status: %+v", st)
	}
	read := findTool(t, c, "files__read_text_file")
	res, err := run(t, read, map[string]any{"path": filepath.Join(root, "notes.txt")})
	if err != nil || res.IsError || res.Text != "buy milk\n" {
		t.Errorf("read_text_file: %+v, %v", res, err)
	}
	res, err = run(t, read, map[string]any{"path": "/etc/passwd"})
	if err != nil || !res.IsError || !strings.Contains(res.Text, "outside allowed directories") {
		t.Errorf("a path outside the root: %+v, %v", res, err)
	}
	c.Close()
	noLeftovers(t, mark)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
