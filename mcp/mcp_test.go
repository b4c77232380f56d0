package mcp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/internal/testbuf"
	"github.com/nbots/nb/tool"
)

func start(t *testing.T, cfg Options) *Clients {
	t.Helper()
	if cfg.Environ == nil {
		cfg.Environ = testEnviron()
	}
	c, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func findTool(t *testing.T, c *Clients, name string) tool.Tool {
	t.Helper()
	var set tool.Set
	for _, x := range c.Tools() {
		set.Add(x)
	}
	x, ok := set.Lookup(name)
	if !ok {
		var names []string
		for _, s := range set.Specs() {
			names = append(names, s.Name)
		}
		t.Fatalf("no tool %s among %v", name, names)
	}
	return x
}

func run(t *testing.T, x tool.Tool, args map[string]any) (*tool.Result, error) {
	t.Helper()
	out, err := x.Run(context.Background(), tool.Call{Name: x.Spec().Name, Arguments: args})
	if err != nil {
		return nil, err
	}
	res, ok := out.(*tool.Result)
	if !ok {
		t.Fatalf("Run returned %T, want *tool.Result", out)
	}
	return res, nil
}

func TestFakeServerTools(t *testing.T) {
	mark := uniqueMark(t)
	c := start(t, Options{Servers: []cartridge.MCPServer{fakeConfig(t, "fake", "ok", mark)}})
	st := c.Status()
	if len(st) != 1 || st[0].State != Running || st[0].Server != "fake 1.0" {
		t.Fatalf("status = %+v", st)
	}

	res, err := run(t, findTool(t, c, "fake__echo"), map[string]any{"text": "hi"})
	if err != nil || res.Text != "echo: hi" || res.IsError {
		t.Fatalf("echo: %+v, %v", res, err)
	}
	res, err = run(t, findTool(t, c, "fake__image"), nil)
	if err != nil || res.Text != "a dot" || len(res.Images) != 1 || res.Images[0].MediaType != "image/png" || !bytes.Equal(res.Images[0].Data, fakePNG) {
		t.Fatalf("image: %+v, %v", res, err)
	}
	res, err = run(t, findTool(t, c, "fake__fail"), nil)
	if err != nil || !res.IsError || res.Text != "the disk is full" {
		t.Fatalf("fail: %+v, %v", res, err)
	}
	// Arguments the tool's schema refuses come back as an error result
	// the model can read and correct (the Go SDK answers so).
	res, err = run(t, findTool(t, c, "fake__echo"), map[string]any{"text": 3})
	if err != nil || !res.IsError || !strings.Contains(res.Text, "text") {
		t.Errorf("a refused call: %+v, %v", res, err)
	}
	// A tool the server does not have is a protocol error naming the
	// server and the tool.
	ghost := &Tool{server: findTool(t, c, "fake__echo").(*Tool).server, remote: "ghost"}
	_, err = ghost.Run(context.Background(), tool.Call{})
	if err == nil || !strings.Contains(err.Error(), `MCP server "fake" refused the call to ghost`) {
		t.Errorf("an unknown tool: %v", err)
	}

	// The program sees its configured variables and nb's base ones,
	// never nb's other variables.
	res, err = run(t, findTool(t, c, "fake__env"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(res.Text, "hunter2") || !strings.Contains(res.Text, "NB_MCP_MARK="+mark) || !strings.Contains(res.Text, "PATH=") {
		t.Errorf("the server's environment:\n%s", res.Text)
	}

	c.Close()
	noLeftovers(t, mark)
	if _, err := run(t, findTool(t, c, "fake__echo"), map[string]any{"text": "hi"}); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Errorf("a call after Close: %v", err)
	}
}

func TestFailedStart(t *testing.T) {
	mark := uniqueMark(t)
	var log testbuf.Buffer
	ok := fakeConfig(t, "good", "ok", mark)
	bad := fakeConfig(t, "broken", "fail", mark)
	bad.File, bad.Line = "bot.yml", 7
	missing := cartridge.MCPServer{Name: "nocmd", Command: "nb-no-such-mcp-server", Transport: "stdio", Display: "nb-no-such-mcp-server --flag", Timeout: time.Second}
	c := start(t, Options{Servers: []cartridge.MCPServer{bad, ok, missing}, Warn: log.Line})

	st := c.Status()
	if st[0].State != Failed || st[1].State != Running || st[2].State != Failed {
		t.Fatalf("states: %s %s %s", st[0].State, st[1].State, st[2].State)
	}
	if !strings.Contains(st[0].Error, "exit status 1") || !strings.Contains(st[0].Error, "cannot open database /nonexistent/db.sqlite") {
		t.Errorf("broken's error: %s", st[0].Error)
	}
	if !strings.Contains(st[2].Error, "nb-no-such-mcp-server") || !strings.Contains(st[2].Error, "not in PATH") {
		t.Errorf("nocmd's error: %s", st[2].Error)
	}
	for _, x := range c.Tools() {
		if !strings.HasPrefix(x.Spec().Name, "good__") {
			t.Errorf("a tool of a failed server: %s", x.Spec().Name)
		}
	}
	out := log.String()
	if n := strings.Count(out, `MCP server "broken" (fake fail, bot.yml:7) cannot start`); n != 1 {
		t.Errorf("broken reported %d times:\n%s", n, out)
	}
	if !strings.Contains(out, "cannot open database") || !strings.Contains(out, `"nocmd" (nb-no-such-mcp-server --flag`) {
		t.Errorf("log:\n%s", out)
	}
	c.Close()
	noLeftovers(t, mark)
}

func TestStartTimeout(t *testing.T) {
	mark := uniqueMark(t)
	var log testbuf.Buffer
	begin := time.Now()
	c := start(t, Options{Servers: []cartridge.MCPServer{fakeConfig(t, "mute", "silent", mark)}, Warn: log.Line, StartTimeout: 500 * time.Millisecond})
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("Start took %s", d)
	}
	st := c.Status()[0]
	if st.State != Failed || !strings.Contains(st.Error, "did not complete the MCP handshake within 500ms") {
		t.Errorf("status: %+v", st)
	}
	// The program that never answered is not left running.
	noLeftovers(t, mark)
	c.Close()
}

func TestCallTimeout(t *testing.T) {
	mark := uniqueMark(t)
	cfg := fakeConfig(t, "slow", "ok", mark)
	cfg.Timeout = 300 * time.Millisecond
	c := start(t, Options{Servers: []cartridge.MCPServer{cfg}})
	begin := time.Now()
	_, err := run(t, findTool(t, c, "slow__hang"), nil)
	if err == nil || !strings.Contains(err.Error(), `MCP server "slow": hang did not answer within 300ms`) {
		t.Fatalf("hang: %v", err)
	}
	if d := time.Since(begin); d > 2*time.Second {
		t.Errorf("the timeout took %s", d)
	}
	// The server is still usable.
	if res, err := run(t, findTool(t, c, "slow__echo"), map[string]any{"text": "still here"}); err != nil || res.Text != "echo: still here" {
		t.Errorf("echo after a timeout: %+v, %v", res, err)
	}
	c.Close()
	noLeftovers(t, mark)
}

func TestCancelledCall(t *testing.T) {
	mark := uniqueMark(t)
	c := start(t, Options{Servers: []cartridge.MCPServer{fakeConfig(t, "slow", "ok", mark)}})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	x := findTool(t, c, "slow__hang")
	_, err := x.Run(ctx, tool.Call{Name: x.Spec().Name})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a cancelled call returned %v", err)
	}
}

func TestExitMidCall(t *testing.T) {
	mark := uniqueMark(t)
	var log testbuf.Buffer
	c := start(t, Options{Servers: []cartridge.MCPServer{fakeConfig(t, "crashy", "ok", mark)}, Warn: log.Line})
	exit := findTool(t, c, "crashy__exit")
	echo := findTool(t, c, "crashy__echo")

	_, err := run(t, exit, nil)
	if err == nil || !strings.Contains(err.Error(), `MCP server "crashy" failed during the call to exit: it exited (exit status 3)`) ||
		!strings.Contains(err.Error(), "panic: out of memory in handler") {
		t.Fatalf("exit: %v", err)
	}
	// Restarted once: the next call works.
	res, err := run(t, echo, map[string]any{"text": "again"})
	if err != nil || res.Text != "echo: again" {
		t.Fatalf("echo after a restart: %+v, %v", res, err)
	}
	if st := c.Status()[0]; st.State != Running || st.Restarts != 1 {
		t.Errorf("status after a restart: %+v", st)
	}
	if !strings.Contains(log.String(), `MCP server "crashy" (fake ok) stopped: it exited (exit status 3); restarting it`) {
		t.Errorf("log:\n%s", log.String())
	}

	// A second death is final.
	if _, err := run(t, exit, nil); err == nil {
		t.Fatal("the second exit succeeded")
	}
	_, err = run(t, echo, map[string]any{"text": "again"})
	if err == nil || !strings.Contains(err.Error(), `MCP server "crashy" is not running: it exited (exit status 3) again after a restart`) {
		t.Errorf("echo after a second death: %v", err)
	}
	if st := c.Status()[0]; st.State != Failed {
		t.Errorf("status after a second death: %+v", st)
	}
	if n := strings.Count(log.String(), "until the bot is restarted"); n != 1 {
		t.Errorf("the final stop reported %d times:\n%s", n, log.String())
	}
	noLeftovers(t, mark)
	c.Close()
}

func TestCloseStopsChildren(t *testing.T) {
	mark := uniqueMark(t)
	c := start(t, Options{Servers: []cartridge.MCPServer{fakeConfig(t, "parent", "ok", mark), fakeConfig(t, "stubborn", "stubborn", mark)}})
	res, err := run(t, findTool(t, c, "parent__spawn"), nil)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(res.Text)
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		t.Fatalf("the grandchild %q is not running", res.Text)
	}
	if len(leftovers(t, mark)) < 3 {
		t.Fatalf("expected two servers and a grandchild: %v", leftovers(t, mark))
	}
	begin := time.Now()
	c.Close()
	if d := time.Since(begin); d > 8*time.Second {
		t.Errorf("Close took %s", d)
	}
	noLeftovers(t, mark)
}

// A start interrupted (Ctrl-C while the servers start) stops the servers
// started so far; once started, servers outlive the start's context.
func TestInterruptedStart(t *testing.T) {
	mark := uniqueMark(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for len(leftovers(t, mark)) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		cancel() // as Ctrl-C does while the program starts
	}()
	c, err := Start(ctx, Options{Servers: []cartridge.MCPServer{fakeConfig(t, "a", "silent", mark)}, Environ: testEnviron()})
	if !errors.Is(err, context.Canceled) || c != nil {
		t.Errorf("Start = %v, %v", c, err)
	}
	noLeftovers(t, mark)

	ctx, cancel = context.WithCancel(context.Background())
	c, err = Start(ctx, Options{Servers: []cartridge.MCPServer{fakeConfig(t, "b", "ok", mark)}, Environ: testEnviron()})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if res, err := run(t, findTool(t, c, "b__echo"), map[string]any{"text": "still"}); err != nil || res.Text != "echo: still" {
		t.Errorf("after the start's context ended: %+v, %v", res, err)
	}
	c.Close()
	noLeftovers(t, mark)
}

func TestConcurrentCalls(t *testing.T) {
	mark := uniqueMark(t)
	c := start(t, Options{Servers: []cartridge.MCPServer{fakeConfig(t, "fake", "ok", mark)}})
	echo := findTool(t, c, "fake__echo")
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := fmt.Sprintf("echo: %d", i)
			res, err := run(t, echo, map[string]any{"text": strconv.Itoa(i)})
			if err != nil {
				errs <- err
			} else if res.Text != want {
				errs <- fmt.Errorf("got %q, want %q", res.Text, want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestMissingEnvServer(t *testing.T) {
	var log testbuf.Buffer
	s := cartridge.MCPServer{Name: "search", URL: "https://mcp.example.com/mcp", Display: "https://mcp.example.com/mcp", Timeout: time.Second,
		Missing: []cartridge.EnvRef{{Path: "mcp.search.headers.Authorization", Var: "SEARCH_TOKEN"}}}
	c := start(t, Options{Servers: []cartridge.MCPServer{s}, Warn: log.Line})
	st := c.Status()[0]
	if st.State != Failed || !strings.Contains(st.Error, "mcp.search.headers.Authorization (ENV/SEARCH_TOKEN)") {
		t.Errorf("status: %+v", st)
	}
	if !strings.Contains(log.String(), "not set") {
		t.Errorf("log: %s", log.String())
	}
}

func TestDisabledAndAllowList(t *testing.T) {
	mark := uniqueMark(t)
	var log testbuf.Buffer
	allowed := fakeConfig(t, "fake", "ok", mark)
	allowed.Tools = []string{"echo", "nope"}
	off := fakeConfig(t, "off", "ok", mark)
	off.Disabled = true
	c := start(t, Options{Servers: []cartridge.MCPServer{allowed, off}, Warn: log.Line})
	var names []string
	for _, x := range c.Tools() {
		names = append(names, x.Spec().Name)
	}
	if strings.Join(names, ",") != "fake__echo" {
		t.Errorf("tools = %v", names)
	}
	st := c.Status()
	if st[1].State != Disabled || len(st[0].Hidden) != 6 || len(st[0].Tools) != 1 || st[0].Tools[0].Name != "fake__echo" {
		t.Errorf("status: %+v", st)
	}
	if !strings.Contains(log.String(), `mcp.fake.tools names "nope", which the server does not offer (its tools: echo, env, exit, fail, hang, image, spawn)`) {
		t.Errorf("log:\n%s", log.String())
	}
	c.Close()
	noLeftovers(t, mark)
}

func TestLookPathUsesGivenPath(t *testing.T) {
	dir := t.TempDir()
	exe := dir + "/my-server"
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if p, err := lookPath("my-server", "/nonexistent:"+dir, "", ""); err != nil || p != exe {
		t.Errorf("lookPath = %q, %v", p, err)
	}
	if _, err := lookPath("my-server", "/usr/bin", "", ""); err == nil {
		t.Error("found a command outside the given PATH")
	}
	if p, err := lookPath("./my-server", "", dir, ""); err != nil || p != exe {
		t.Errorf("a relative command: %q, %v", p, err)
	}
	if p, err := lookPath("~/my-server", "", "/elsewhere", dir); err != nil || p != exe {
		t.Errorf("a command in ~: %q, %v", p, err)
	}
}

// A server's tool-prefix is the whole start of its tools' names: the
// gateway's nanobot profile names them mcp_<server>_<tool>, as nanobot
// does, so that prompts and skills naming them keep working.
func TestToolPrefix(t *testing.T) {
	mark := uniqueMark(t)
	cfg := fakeConfig(t, "my_files", "ok", mark)
	cfg.ToolPrefix = "mcp_my_files_"
	cfg.Tools = []string{"echo"}
	c := start(t, Options{Servers: []cartridge.MCPServer{cfg}})
	var names []string
	for _, x := range c.Tools() {
		names = append(names, x.Spec().Name)
	}
	if strings.Join(names, ",") != "mcp_my_files_echo" {
		t.Fatalf("tools = %v", names)
	}
	if res, err := run(t, findTool(t, c, "mcp_my_files_echo"), map[string]any{"text": "hi"}); err != nil || res.Text != "echo: hi" {
		t.Fatalf("%+v %v", res, err)
	}
	c.Close()
	noLeftovers(t, mark)
}
