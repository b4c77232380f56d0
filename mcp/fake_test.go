package mcp

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nbots/nb/cartridge"
)

// The test binary doubles as a family of small MCP servers written with
// the Go SDK (NB_MCP_FAKE picks one), so the failure cases run against a
// real stdio server without anything to install.
func TestMain(m *testing.M) {
	if mode := os.Getenv("NB_MCP_FAKE"); mode != "" {
		os.Exit(fakeServer(mode))
	}
	os.Exit(m.Run())
}

// fakePNG is a 1x1 PNG.
var fakePNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82")

func fakeServer(mode string) int {
	switch mode {
	case "fail":
		fmt.Fprintln(os.Stderr, "starting fake server")
		fmt.Fprintln(os.Stderr, "error: cannot open database /nonexistent/db.sqlite")
		return 1
	case "silent":
		// Reads its input and never answers: the handshake times out.
		buf := make([]byte, 4096)
		for {
			if _, err := os.Stdin.Read(buf); err != nil {
				time.Sleep(time.Hour) // even at EOF it stays, to be killed
			}
		}
	}
	s := sdk.NewServer(&sdk.Implementation{Name: "fake", Version: "1.0"}, nil)
	type echoIn struct {
		Text string `json:"text" jsonschema:"the text to echo"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echoes its text."}, func(_ context.Context, _ *sdk.CallToolRequest, in echoIn) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "echo: " + in.Text}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "image", Description: "Returns a picture."}, func(_ context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "a dot"}, &sdk.ImageContent{MIMEType: "image/png", Data: fakePNG}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "fail", Description: "Reports a failure."}, func(_ context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "the disk is full"}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "hang", Description: "Never answers."}, func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
		<-ctx.Done()
		time.Sleep(time.Hour)
		return nil, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "exit", Description: "Dies mid-call."}, func(_ context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
		fmt.Fprintln(os.Stderr, "panic: out of memory in handler")
		os.Exit(3)
		return nil, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "spawn", Description: "Starts a child that outlives the call."}, func(_ context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
		cmd := exec.Command("sleep", "600")
		if err := cmd.Start(); err != nil {
			return nil, nil, err
		}
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strconv.Itoa(cmd.Process.Pid)}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "env", Description: "Lists its environment."}, func(_ context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: strings.Join(os.Environ(), "\n")}}}, nil, nil
	})
	if mode == "stubborn" {
		// Ignores SIGTERM and closed input: only SIGKILL stops it.
		signal.Ignore(syscall.SIGTERM)
		go func() {
			s.Run(context.Background(), &sdk.StdioTransport{})
		}()
		time.Sleep(time.Hour)
	}
	if err := s.Run(context.Background(), &sdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// fakeConfig is a server entry that runs the test binary as a fake
// server; mark lets leftovers find its processes.
func fakeConfig(t testing.TB, name, mode, mark string) cartridge.MCPServer {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return cartridge.MCPServer{
		Name: name, Command: exe, Transport: "stdio", Timeout: 5 * time.Second, Display: "fake " + mode,
		Env: map[string]string{"NB_MCP_FAKE": mode, "NB_MCP_MARK": mark},
	}
}

// testEnviron is the environment the tests give Start: what a program
// needs, and a secret that must not reach the servers.
func testEnviron() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "NB_TEST_SECRET=hunter2"}
}

// leftovers lists the live processes whose environment has
// NB_MCP_MARK=mark (a server, or a child it started).
func leftovers(t testing.TB, mark string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("SKIPPING the process check: %v", err)
	}
	var out []string
	want := []byte("NB_MCP_MARK=" + mark + "\x00")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, want) {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
			continue // a zombie is dead, waiting for its reaper
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out = append(out, fmt.Sprintf("%d %s", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
	}
	return out
}

// noLeftovers fails the test when processes with mark are still alive a
// moment after the clients closed.
func noLeftovers(t testing.TB, mark string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		left := leftovers(t, mark)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("processes left behind:\n%s", strings.Join(left, "\n"))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func uniqueMark(t testing.TB) string {
	return fmt.Sprintf("%s-%d-%d", strings.ReplaceAll(t.Name(), "/", "_"), os.Getpid(), time.Now().UnixNano())
}
