package agentsrv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/agentproto"
	"github.com/nbots/nb/provider/providertest"
)

// A server tool that needs confirmation sends confirm and waits for
// confirm_result: allowed, it runs and its result is reported; denied,
// the model gets the reference's denial text.
func TestConfirmation(t *testing.T) {
	dir := t.TempDir()
	url, _ := fakeOpenAI(t, providertest.Echo)
	a := newAgent(t, dir, url, "Careful", `safety: {tools: {confirmable: true}, functions: {sandboxed: false}}
tools:
  - name: delete-file
    parameters: {type: object, properties: {path: {type: string}}}
    lua: return "deleted " .. parameters.path
`)
	srv, _ := serve(t, nil, a)
	for _, allow := range []bool{true, false} {
		c := start(t, srv.URL, "Careful", &agentproto.Frame{Input: `call delete-file {"path":"a.txt"}`})
		var confirmID string
		end := c.finish(func(f *agentproto.Frame) {
			switch f.Type {
			case agentproto.TypeConfirm:
				in, _ := f.Input.(map[string]any)
				if f.Name != "delete-file" || in["path"] != "a.txt" {
					t.Errorf("confirm %+v", f)
				}
				confirmID = f.ID
				c.send(&agentproto.Frame{Type: agentproto.TypeConfirmResult, ID: f.ID, Allow: agentproto.Bool(allow)})
			case agentproto.TypeToolResult:
				if !allow || f.ID != confirmID || f.Output != "deleted a.txt" {
					t.Errorf("tool_result %+v", f)
				}
			}
		})
		want := "tool delete-file said: deleted a.txt"
		if !allow {
			want = "tool delete-file said: " + agent.DenialText
		}
		if confirmID == "" || end.Result != want {
			t.Errorf("allow=%v: end %+v\n%s", allow, end, c.dump())
		}
	}
}

// Input, parameters and output are checked against their schemas: bad
// input and parameters are refused before any model call; an output
// that does not fit is asked for once more, then refused.
func TestSchemaRejections(t *testing.T) {
	dir := t.TempDir()
	box := &brainBox{fn: providertest.Echo}
	url, rec := fakeOpenAI(t, box.brain)
	typed := newAgent(t, dir, url, "Typed", `agent:
  input-schema: {type: object, properties: {city: {type: string}}, required: [city], additionalProperties: false}
  output-schema: {type: object, properties: {temp: {type: number}}, required: [temp]}
`)
	srv, _ := serve(t, nil, typed)
	for _, tc := range []struct {
		run  *agentproto.Frame
		want string
	}{
		{&agentproto.Frame{Input: "Paris"}, `input: must be an object, not a string`},
		{&agentproto.Frame{Input: map[string]any{"town": "Paris"}}, `input: unexpected additional properties ["town"]`},
		{&agentproto.Frame{Input: map[string]any{}}, `input: required: missing properties: ["city"]`},
		{&agentproto.Frame{Input: map[string]any{"city": "Paris"}, Parameters: map[string]any{"temperature": "hot"}}, `parameters: temperature: must be a number, not a string`},
		{&agentproto.Frame{Input: map[string]any{"city": "Paris"}, Parameters: map[string]any{"top_p": 0.5}}, `parameters: unexpected additional properties ["top_p"]`},
	} {
		c := start(t, srv.URL, "Typed", tc.run)
		end := c.finish(nil)
		if end.Code != agentproto.CodeValidation || !strings.Contains(end.Message, tc.want) {
			t.Errorf("%+v: end %+v, want %q", tc.run, end, tc.want)
		}
	}
	if n := len(rec.Bodies()); n != 0 {
		t.Errorf("%d model calls for refused runs", n)
	}

	// Valid parameters reach the provider; an output asked for twice
	// that never fits is an error, never a final_result.
	box.fn = providertest.Scripted(providertest.Reply{Chunks: []string{"warm"}}, providertest.Reply{Chunks: []string{`{"temp": "warm"}`}})
	c := start(t, srv.URL, "Typed", &agentproto.Frame{Input: map[string]any{"city": "Paris"}, Parameters: map[string]any{"temperature": 0.1}})
	end := c.finish(nil)
	if end.Code != agentproto.CodeValidation || !strings.Contains(end.Message, `temp: must be a number, not a string`) {
		t.Errorf("end %+v", end)
	}
	first := rec.Last()
	if first["temperature"] != 0.1 || first["response_format"] == nil {
		t.Errorf("request %v", first)
	}
	if !strings.Contains(string(rec.Bodies()[1]), "not valid against the output schema: it is not JSON") {
		t.Errorf("the second request does not say what was wrong: %s", rec.Bodies()[1])
	}

	// Asked again, a fitting answer is the result.
	box.fn = providertest.Scripted(providertest.Reply{Chunks: []string{"warm"}}, providertest.Reply{Chunks: []string{"```json\n{\"temp\": 21.5}\n```"}})
	c = start(t, srv.URL, "Typed", &agentproto.Frame{Input: map[string]any{"city": "Paris"}})
	end = c.finish(nil)
	if m, _ := end.Result.(map[string]any); end.Type != agentproto.TypeFinalResult || m["temp"] != 21.5 {
		t.Errorf("end %+v", end)
	}
	// A required tool neither served nor declared refuses the run.
	needy := newAgent(t, dir, url, "Needy", "agent: {required-tools: [RunCommand]}\n")
	srv2, _ := serve(t, nil, needy)
	end = start(t, srv2.URL, "Needy", &agentproto.Frame{Input: "hi"}).finish(nil)
	if end.Code != agentproto.CodeMissingTools || !strings.Contains(end.Message, "RunCommand") {
		t.Errorf("end %+v", end)
	}
	end = start(t, srv2.URL, "Needy", &agentproto.Frame{Input: "hi", Tools: []agentproto.ToolRepr{{Name: "RunCommand"}}}).finish(nil)
	if end.Type != agentproto.TypeFinalResult {
		t.Errorf("declared: end %+v", end)
	}
	end = start(t, srv.URL, "Nobody", &agentproto.Frame{Input: "hi"}).finish(nil)
	if end.Code != agentproto.CodeUnknownAgent {
		t.Errorf("unknown agent: %+v", end)
	}
}

// A dropped connection cancels the run: the running tool's process is
// killed and no further model call is made.
func TestDroppedConnectionKillsTool(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	page := fmt.Sprintf(`functions:
  sleeper:
    description: Sleeps.
    parameters: {}
    cmdline: [sh, -c, "echo $$ > %s; exec sleep 30"]
`, pidFile)
	os.MkdirAll(filepath.Join(dir, "pages"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, "pages", "sleep.yml"), []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	url, rec := fakeOpenAI(t, providertest.Echo)
	a := newAgent(t, dir, url, "Sleepy", "robopages:\n  - path: pages/sleep.yml\n")
	srv, _ := serve(t, nil, a)
	c := start(t, srv.URL, "Sleepy", &agentproto.Frame{Input: "call sleeper {}"})
	var pid int
	deadline := time.Now().Add(10 * time.Second)
	for pid == 0 && time.Now().Before(deadline) {
		data, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		time.Sleep(10 * time.Millisecond)
	}
	if pid == 0 {
		t.Fatalf("the tool never started\n%s", c.dump())
	}
	c.conn.Abort()
	deadline = time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatal("the tool's process outlived the connection")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(rec.Bodies()); n != 1 {
		t.Errorf("%d model calls, want 1 (none after the drop)", n)
	}
}

// The limits of a connection: a frame over the size limit and frames
// over the rate are discarded with error frames, and the run goes on; a
// client that never answers a tool call ends the run with a timeout.
func TestConnectionLimits(t *testing.T) {
	url, _ := fakeOpenAI(t, providertest.Echo)
	a := newAgent(t, t.TempDir(), url, "Echo", "")
	srv, rt := serve(t, &Handler{MaxFrame: 4096, Rate: 1, Burst: 3}, a)
	c := start(t, srv.URL, "Echo", &agentproto.Frame{Input: "call now {}", Tools: []agentproto.ToolRepr{{Name: "now"}}})
	var call *agentproto.Frame
	for call == nil {
		if f := c.next(); f.Type == agentproto.TypeToolCall {
			call = f
		}
	}
	c.send(&agentproto.Frame{Type: agentproto.TypeInput, Content: strings.Repeat("x", 5000)})
	if f := c.next(); f.Code != agentproto.CodeFrameTooLarge || !strings.Contains(f.Message, "4 KiB") || f.Terminal() {
		t.Fatalf("big frame: %+v", f)
	}
	for _, word := range []string{"one", "two", "three", "four"} {
		c.send(&agentproto.Frame{Type: agentproto.TypeInput, Content: word})
	}
	if f := c.next(); f.Code != agentproto.CodeRateLimited {
		t.Fatalf("fast frames: %+v", f)
	}
	// The tool result goes through once the rate allows a frame again
	// (a frame over the rate is discarded and answered rate_limited).
	var end *agentproto.Frame
	for deadline := time.Now().Add(5 * time.Second); end == nil; {
		c.send(&agentproto.Frame{Type: agentproto.TypeToolResult, ID: call.ID, Output: "noon"})
		if f := c.next(); f.Code == agentproto.CodeRateLimited {
			if time.Now().After(deadline) {
				t.Fatal("the rate never allowed the tool result")
			}
			time.Sleep(50 * time.Millisecond)
			continue
		} else if f.Terminal() {
			end = f
			if _, err := c.read(5 * time.Second); err != errClosed {
				t.Errorf("after the terminal frame: %v, want a normal close", err)
			}
		} else {
			end = c.finish(nil)
		}
	}
	if end.Type != agentproto.TypeFinalResult {
		t.Fatalf("end %+v\n%s", end, c.dump())
	}

	// A bad frame is an error frame, not a dropped connection.
	rt.IdleLimit = 300 * time.Millisecond
	c = start(t, srv.URL, "Echo", &agentproto.Frame{Input: "call now {}", Tools: []agentproto.ToolRepr{{Name: "now"}}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	end = c.finish(func(f *agentproto.Frame) {
		if f.Type == agentproto.TypeToolCall {
			c.send(&agentproto.Frame{Type: "dance"})
		}
	})
	if end.Code != agentproto.CodeTimeout || !strings.Contains(end.Message, "no tool_result for") {
		t.Errorf("end %+v\n%s", end, c.dump())
	}
	if !strings.Contains(c.dump(), `"code":"protocol_error","message":"bad frame: `) {
		t.Errorf("no error for the bad frame:\n%s", c.dump())
	}

	// A first frame that is not a run is refused with an error frame.
	cl, _ := agentproto.NewClient(srv.URL, "")
	conn, err := cl.Dial(ctx, cl.RunURL("Echo"))
	if err != nil {
		t.Fatal(err)
	}
	conn.Send(ctx, &agentproto.Frame{Type: agentproto.TypeStop})
	f, err := conn.Read(ctx)
	if err != nil || f.Code != agentproto.CodeProtocol {
		t.Errorf("first frame stop: %+v %v", f, err)
	}
	if _, err := conn.Read(ctx); websocket.CloseStatus(err) != -1 && err.Error() != "EOF" {
		t.Errorf("after the refusal: %v", err)
	}
}

// MaxRuns bounds the runs in progress; the handler's context ends them
// all (a server shutting down) with error cancelled.
func TestRunsLimitAndShutdown(t *testing.T) {
	url, _ := fakeOpenAI(t, providertest.Echo)
	ctx, shutdown := context.WithCancel(context.Background())
	h := &Handler{MaxRuns: 1, Context: ctx}
	srv, _ := serve(t, h, newAgent(t, t.TempDir(), url, "Echo", ""))
	c := start(t, srv.URL, "Echo", &agentproto.Frame{Input: "call now {}", Tools: []agentproto.ToolRepr{{Name: "now"}}})
	for c.next().Type != agentproto.TypeToolCall {
	}
	if h.Runs() != 1 {
		t.Errorf("%d runs", h.Runs())
	}
	cl, _ := agentproto.NewClient(srv.URL, "")
	dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cl.Start(dctx, "Echo", &agentproto.Frame{Input: "hi"}); err == nil || !strings.Contains(err.Error(), "HTTP 503") {
		t.Errorf("second run: %v", err)
	}
	shutdown()
	end := c.finish(nil)
	if end.Code != agentproto.CodeCancelled {
		t.Errorf("end %+v", end)
	}
	deadline := time.Now().Add(5 * time.Second)
	for h.Runs() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if h.Runs() != 0 {
		t.Errorf("%d runs after the shutdown", h.Runs())
	}
}

// A client that opens a websocket and sends nothing gets a timeout error
// frame, then a normal close.
func TestFirstFrameTimeout(t *testing.T) {
	url, _ := fakeOpenAI(t, providertest.Echo)
	srv, _ := serve(t, &Handler{FirstFrame: 200 * time.Millisecond}, newAgent(t, t.TempDir(), url, "Echo", ""))
	cl, _ := agentproto.NewClient(srv.URL, "")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := cl.Dial(ctx, cl.RunURL("Echo"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Abort()
	f, err := conn.Read(ctx)
	if err != nil || f.Code != agentproto.CodeTimeout || f.Message != "no run frame within 200ms" {
		t.Fatalf("%+v %v", f, err)
	}
	if _, err := conn.Read(ctx); err == nil || err.Error() != "EOF" {
		t.Errorf("after the error: %v, want a normal close", err)
	}
}
