package agentsrv

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/agentproto"
	"github.com/nbots/nb/provider/providertest"
)

// Discovery lists the agents with their effective schemas and the
// tools the server runs, in the shapes the schemas give.
func TestDiscovery(t *testing.T) {
	dir := t.TempDir()
	url, _ := fakeOpenAI(t, providertest.Echo)
	writer := newAgent(t, dir, url, "Writer", `tools:
  - name: word-count
    description: Counts words.
    parameters: {type: object, properties: {text: {type: string}}, required: [text]}
    lua: return 2
agent:
  output-schema: {type: object, properties: {words: {type: integer}}, required: [words]}
  required-tools: [word-count]
`)
	srv, _ := serve(t, nil, writer, newAgent(t, dir, url, "Plain", ""))
	for _, tc := range []struct{ path, schema, want string }{
		{"/agents", "agents", `"name":"Writer","description":"the Writer agent","type":"functions","input_schema":{"type":"string"},"parameter_schema":{"additionalProperties":false,"properties":{"temperature":{`},
		{"/tools", "tools", `[{"name":"word-count","description":"Counts words.","input_schema":{`},
		{"/agents/Plain", "", `{"name":"Plain",`},
	} {
		resp, err := http.Get(srv.URL + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), tc.want) {
			t.Errorf("GET %s: %d %s, want %s", tc.path, resp.StatusCode, body, tc.want)
		}
		if tc.schema != "" {
			var v any
			json.Unmarshal(body, &v) //nolint:errcheck // checked by the schema
			if err := agentproto.Validate(tc.schema, v); err != nil {
				t.Errorf("GET %s does not follow %s.json: %v", tc.path, tc.schema, err)
			}
		}
	}
	resp, err := http.Get(srv.URL + "/agents/Nobody")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(body), `"code":"unknown_agent"`) {
		t.Errorf("unknown agent: %d %s", resp.StatusCode, body)
	}
	// The Go client reads the same.
	c, _ := agentproto.NewClient(srv.URL, "")
	list, err := c.Agents(context.Background())
	if err != nil || len(list) != 2 || list[0].OutputSchema["required"] == nil {
		t.Errorf("client: %+v %v", list, err)
	}
}

// A run of a plain agent: run_started, chunks that add up to each step,
// the step, the final result; the usages of the steps sum to the final
// usage; the connection closes normally.
func TestRunStreams(t *testing.T) {
	url, _ := fakeOpenAI(t, providertest.Echo)
	srv, _ := serve(t, nil, newAgent(t, t.TempDir(), url, "Echo", ""))
	c := start(t, srv.URL, "Echo", &agentproto.Frame{Input: "hello there", Chunks: true, Context: map[string]any{"user": "ann"}})
	var text strings.Builder
	var usage agentproto.Usage
	end := c.finish(func(f *agentproto.Frame) {
		switch f.Type {
		case agentproto.TypeStepChunk:
			text.WriteString(f.Delta)
		case agentproto.TypeStep:
			if *f.Generated != text.String() {
				t.Errorf("chunks %q, step %q", text.String(), *f.Generated)
			}
			usage = usage.Add(*f.Usage)
			if m, _ := f.Context.(map[string]any); m["user"] != "ann" {
				t.Errorf("step context %v", f.Context)
			}
		}
	})
	if end.Type != agentproto.TypeFinalResult || end.Result != "echo: hello there" || *end.Usage != usage || usage.OutputTokens == 0 {
		t.Fatalf("end %+v, usage %+v\n%s", end, usage, c.dump())
	}
	if m, _ := end.Context.(map[string]any); m["user"] != "ann" {
		t.Errorf("final context %v", end.Context)
	}
	if got := c.types(); !strings.HasPrefix(got, "run_started step_chunk") || !strings.HasSuffix(got, "step final_result") {
		t.Errorf("frames %s", got)
	}
	// Without chunks, whole steps only.
	c = start(t, srv.URL, "Echo", &agentproto.Frame{Input: "hi"})
	c.finish(nil)
	if got := c.types(); got != "run_started step final_result" {
		t.Errorf("frames without chunks: %s", got)
	}
}

// A tool the client declares and the server lacks: the server sends
// tool_call with the run's context and waits; the result reaches the
// model. The call is on the step that asked for it, with the same id.
func TestClientTool(t *testing.T) {
	url, rec := fakeOpenAI(t, providertest.Echo)
	srv, _ := serve(t, nil, newAgent(t, t.TempDir(), url, "Echo", ""))
	tools := []agentproto.ToolRepr{{Name: "local time", Description: "The user's time.", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"zone": map[string]any{"type": "string"}}}}}
	c := start(t, srv.URL, "Echo", &agentproto.Frame{Input: `call local_time {"zone":"CET"}`, Tools: tools, Context: map[string]any{"n": 1}})
	var stepCall string
	end := c.finish(func(f *agentproto.Frame) {
		switch f.Type {
		case agentproto.TypeStep:
			if len(f.ToolCalls) == 1 {
				stepCall = f.ToolCalls[0].ID
			}
		case agentproto.TypeToolCall:
			in, _ := f.Input.(map[string]any)
			if f.Name != "local time" || in["zone"] != "CET" || f.ID != stepCall || f.Context == nil {
				t.Errorf("tool_call %+v (step's call %s)", f, stepCall)
			}
			c.send(&agentproto.Frame{Type: agentproto.TypeToolResult, ID: f.ID, Output: "12:00", Context: map[string]any{"n": 2}})
		case agentproto.TypeToolResult:
			t.Errorf("the server reported the client's own tool: %+v", f)
		}
	})
	if end.Result != "tool local_time said: 12:00" {
		t.Fatalf("end %+v\n%s", end, c.dump())
	}
	if m, _ := end.Context.(map[string]any); m["n"] != float64(2) {
		t.Errorf("the tool's context did not come back: %v", end.Context)
	}
	if !strings.Contains(string(rec.Bodies()[0]), `"name":"local_time"`) {
		t.Errorf("the client's tool was not offered: %s", rec.Bodies()[0])
	}
}

// Three pending client calls answered out of order reach the model in
// call order; an unknown id and a second answer are error frames and
// the run goes on.
func TestPendingCallsOutOfOrder(t *testing.T) {
	url, _ := fakeOpenAI(t, providertest.Echo)
	srv, _ := serve(t, nil, newAgent(t, t.TempDir(), url, "Echo", ""))
	var tools []agentproto.ToolRepr
	for _, n := range []string{"a", "b", "c"} {
		tools = append(tools, agentproto.ToolRepr{Name: n})
	}
	c := start(t, srv.URL, "Echo", &agentproto.Frame{Input: "call a {}; b {}; c {}", Tools: tools})
	// The calls run at once: their frames come in any order.
	calls := make([]*agentproto.Frame, 3)
	for n := 0; n < 3; {
		if f := c.next(); f.Type == agentproto.TypeToolCall {
			calls[f.Name[0]-'a'] = f
			n++
		}
	}
	c.send(&agentproto.Frame{Type: agentproto.TypeToolResult, ID: calls[2].ID, Output: "C"})
	c.send(&agentproto.Frame{Type: agentproto.TypeToolResult, ID: "nope", Output: "?"})
	if f := c.next(); f.Type != agentproto.TypeError || f.Code != agentproto.CodeUnknownCallID || f.ID != "nope" || f.Terminal() {
		t.Fatalf("unknown id: %+v", f)
	}
	c.send(&agentproto.Frame{Type: agentproto.TypeToolResult, ID: calls[0].ID, Output: "A"})
	c.send(&agentproto.Frame{Type: agentproto.TypeToolResult, ID: calls[2].ID, Output: "C again"})
	if f := c.next(); f.Code != agentproto.CodeDuplicateResult || f.ID != calls[2].ID {
		t.Fatalf("duplicate: %+v", f)
	}
	c.send(&agentproto.Frame{Type: agentproto.TypeToolResult, ID: calls[1].ID, Output: map[string]any{"b": true}, IsError: true})
	end := c.finish(nil)
	if end.Result != `tool a said: A; tool b said: {"b":true}; tool c said: C` {
		t.Fatalf("end %+v\n%s", end, c.dump())
	}
}

// Steering: an input frame sent while a tool call waits is given to the
// model after that tool round, as a user message.
func TestSteering(t *testing.T) {
	url, rec := fakeOpenAI(t, providertest.Echo)
	srv, _ := serve(t, nil, newAgent(t, t.TempDir(), url, "Echo", ""))
	c := start(t, srv.URL, "Echo", &agentproto.Frame{Input: "call now {}", Tools: []agentproto.ToolRepr{{Name: "now"}}})
	end := c.finish(func(f *agentproto.Frame) {
		if f.Type == agentproto.TypeToolCall {
			c.send(&agentproto.Frame{Type: agentproto.TypeInput, Content: "be brief"})
			c.send(&agentproto.Frame{Type: agentproto.TypeToolResult, ID: f.ID, Output: "noon"})
		}
	})
	if end.Result != "echo: be brief" {
		t.Fatalf("end %+v", end)
	}
	turn, err := openaiTurn(rec.Bodies()[1])
	if err != nil {
		t.Fatal(err)
	}
	n := len(turn.Messages)
	if turn.Messages[n-2].Role != "tool" || turn.Messages[n-1].Role != "user" || turn.Messages[n-1].Content != "be brief" {
		t.Errorf("second request %+v", turn.Messages)
	}
}

// stop mid-stream ends the run within a second with error cancelled,
// and no further model call is made.
func TestStopMidStream(t *testing.T) {
	slow := providertest.Reply{Chunks: providertest.Split(strings.Repeat("slow text ", 30), 5), Delay: 20 * time.Millisecond}
	url, rec := fakeOpenAI(t, providertest.Scripted(slow))
	srv, _ := serve(t, nil, newAgent(t, t.TempDir(), url, "Slow", ""))
	c := start(t, srv.URL, "Slow", &agentproto.Frame{Input: "talk", Chunks: true})
	for c.next().Type != agentproto.TypeStepChunk {
	}
	stopped := time.Now()
	c.send(&agentproto.Frame{Type: agentproto.TypeStop})
	end := c.finish(nil)
	if end.Type != agentproto.TypeError || end.Code != agentproto.CodeCancelled {
		t.Fatalf("end %+v", end)
	}
	if d := time.Since(stopped); d > time.Second {
		t.Errorf("stop took %s", d)
	}
	if n := len(rec.Bodies()); n != 1 {
		t.Errorf("%d model calls", n)
	}
}

// openaiTurn decodes a recorded Chat Completions request.
func openaiTurn(body []byte) (providertest.Turn, error) {
	return openaitestDecode(body)
}

// A run that reaches its round limit ends with a final_result that says
// so (stopped, message, the usage so far), not an error; with events:
// true the loop's events come as event frames, in the reference's names:
// the session bracketed, the input, the loop warning, the turn limit.
func TestRoundLimitAndEvents(t *testing.T) {
	url, _ := fakeOpenAI(t, func(providertest.Turn) providertest.Reply {
		return providertest.Reply{Calls: []providertest.Call{{ID: "c", Name: "ping", Arguments: `{}`}}}
	})
	body := "safety: {tools: {confirmable: false, rounds: 4}, functions: {sandboxed: false}}\ntools:\n  - name: ping\n    lua: return 'pong'\n"
	srv, _ := serve(t, nil, newAgent(t, t.TempDir(), url, "Pinger", body))
	c := start(t, srv.URL, "Pinger", &agentproto.Frame{Input: "go", Events: true})
	end := c.finish(nil)
	if end.Type != agentproto.TypeFinalResult || end.Stopped != agent.StopRoundLimit || !strings.Contains(end.Message, "stopped after 4 rounds") || end.Usage == nil {
		t.Fatalf("end %+v\n%s", end, c.dump())
	}
	var kinds []string
	for _, f := range c.all {
		if f.Type == agentproto.TypeEvent {
			kinds = append(kinds, f.Kind)
			if f.Kind == "loop_detection" && f.Message != agent.LoopWarning(3) {
				t.Errorf("loop_detection %q", f.Message)
			}
			if f.Kind == "turn_limit" && f.Step != 4 {
				t.Errorf("turn_limit at step %d", f.Step)
			}
		}
	}
	if got := strings.Join(kinds, " "); got != "session_start user_input loop_detection turn_limit session_end" {
		t.Errorf("events: %s\n%s", got, c.dump())
	}
}

// With follow_ups, the connection stays open after final_result: an
// input frame starts a follow-up run on the same conversation (its own
// run_started and run id), and stop closes the connection.
func TestFollowUp(t *testing.T) {
	url, rec := fakeOpenAI(t, providertest.Echo)
	srv, _ := serve(t, nil, newAgent(t, t.TempDir(), url, "Echo", ""))
	c := start(t, srv.URL, "Echo", &agentproto.Frame{Input: "hello", FollowUps: true})
	until := func(typ string) *agentproto.Frame {
		for {
			if f := c.next(); f.Type == typ {
				return f
			}
		}
	}
	first := c.runID
	if end := until(agentproto.TypeFinalResult); end.Result != "echo: hello" {
		t.Fatalf("first result %+v", end)
	}
	c.send(&agentproto.Frame{Type: agentproto.TypeInput, Content: "again"})
	c.runID = "" // the follow-up is a run of its own
	started := until(agentproto.TypeRunStarted)
	if started.RunID == first || started.Agent != "Echo" {
		t.Errorf("follow-up run_started %+v (first run %s)", started, first)
	}
	if end := until(agentproto.TypeFinalResult); end.Result != "echo: again" {
		t.Fatalf("follow-up result %+v", end)
	}
	turn, err := openaiTurn(rec.Bodies()[1])
	if err != nil {
		t.Fatal(err)
	}
	var said []string
	for _, m := range turn.Messages {
		if m.Role != "system" {
			said = append(said, m.Role+": "+m.Content)
		}
	}
	if got := strings.Join(said, " | "); got != "user: hello | assistant: echo: hello | user: again" {
		t.Errorf("the follow-up's request: %s", got)
	}
	c.send(&agentproto.Frame{Type: agentproto.TypeStop})
	if _, err := c.read(5 * time.Second); err != errClosed {
		t.Errorf("after stop: %v, want a normal close", err)
	}
}

// answeredInput reads frames (across a follow-up's run ids) until a
// final_result whose result has want; it fails when the connection
// closes or goes quiet first: the input was lost.
func answeredInput(t *testing.T, c *client, want string) *agentproto.Frame {
	t.Helper()
	for {
		c.runID = "" // a follow-up is a run of its own
		f, err := c.read(5 * time.Second)
		if err != nil {
			t.Fatalf("no final_result answering %q: %v\n%s", want, err, c.dump())
		}
		if f.Type == agentproto.TypeError {
			t.Fatalf("error frame %+v\n%s", f, c.dump())
		}
		if f.Type == agentproto.TypeFinalResult {
			if s, _ := f.Result.(string); strings.Contains(s, want) {
				return f
			}
		}
	}
}

// An input is never lost, whenever it comes. Sent right after the run
// frame, before the first model call, it joins the first request (or,
// when the call began first, is the next turn).
func TestInputBeforeTheFirstCall(t *testing.T) {
	url, rec := fakeOpenAI(t, providertest.Echo)
	srv, _ := serve(t, nil, newAgent(t, t.TempDir(), url, "Echo", ""))
	c := start(t, srv.URL, "Echo", &agentproto.Frame{Input: "hello", FollowUps: true})
	c.send(&agentproto.Frame{Type: agentproto.TypeInput, Content: "in French"})
	answeredInput(t, c, "in French")
	found := false
	for _, body := range rec.Bodies() {
		turn, err := openaiTurn(body)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(turn.LastUser(), "in French") {
			found = true
		}
	}
	if !found {
		t.Errorf("no request ends with the input")
	}
}

// Sent while the run's last, text-only round streams (no tool round
// follows to take it as steering), an input is the conversation's next
// turn: the model answers it after its answer, with or without
// follow_ups, and the run's final_result is that answer.
func TestInputDuringTheLastRound(t *testing.T) {
	for _, followUps := range []bool{true, false} {
		t.Run(fmt.Sprintf("follow_ups=%v", followUps), func(t *testing.T) {
			slow := providertest.Reply{Chunks: providertest.Split(strings.Repeat("slow text ", 20), 5), Delay: 20 * time.Millisecond}
			url, rec := fakeOpenAI(t, providertest.Scripted(slow))
			srv, _ := serve(t, nil, newAgent(t, t.TempDir(), url, "Slow", ""))
			c := start(t, srv.URL, "Slow", &agentproto.Frame{Input: "talk", Chunks: true, FollowUps: followUps})
			for c.next().Type != agentproto.TypeStepChunk {
			}
			c.send(&agentproto.Frame{Type: agentproto.TypeInput, Content: "now in French"})
			end := answeredInput(t, c, "echo: now in French")
			if !followUps {
				if _, err := c.read(5 * time.Second); err != errClosed {
					t.Errorf("after the final_result: %v, want a normal close", err)
				}
			}
			if end.Usage == nil {
				t.Errorf("usage %+v", end.Usage)
			}
			turn, err := openaiTurn(rec.Bodies()[1])
			if err != nil {
				t.Fatal(err)
			}
			var said []string
			for _, m := range turn.Messages {
				if m.Role != "system" {
					said = append(said, m.Role+": "+m.Content)
				}
			}
			if got := strings.Join(said, " | "); got != "user: talk | assistant: "+slow.Text()+" | user: now in French" {
				t.Errorf("the second request: %s", got)
			}
		})
	}
}
