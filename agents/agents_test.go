package agents

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nbots/nb/agentproto"
	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"

	_ "github.com/nbots/nb/provider/openai"
)

func fake(t *testing.T, brain providertest.Brain) (string, *providertest.Recorder) {
	t.Helper()
	s := openaitest.New(brain)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv.URL, s.Recorder
}

func newAgent(t *testing.T, url, name, body string) *Agent {
	t.Helper()
	src := fmt.Sprintf("meta: {name: %s, description: the %s agent}\nsafety: {tools: {confirmable: false}}\nprovider:\n  id: openai\n  credentials: {address: %s, access-token: k}\n  settings: {model: gpt-4o}\n%s", name, name, url, body)
	c, err := cartridge.Parse([]byte(src), name+".yml", cartridge.FormatYAML, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bot.New(context.Background(), c, bot.Host{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := FromCartridge(b)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// collect runs an agent to its end and returns its frames.
func collect(t *testing.T, rt *Runtime, name string, req Request, answer func(*Run, *agentproto.Frame)) []*agentproto.Frame {
	t.Helper()
	var mu sync.Mutex
	var frames []*agentproto.Frame
	var run *Run
	ready := make(chan struct{})
	run = rt.Start(context.Background(), name, req, func(f *agentproto.Frame) {
		data, _ := json.Marshal(f)
		if err := agentproto.Validate(f.Type, agentproto.Plain(json.RawMessage(data))); err != nil && f.Type != "" {
			// seq is the transport's: check the rest.
			if !strings.Contains(err.Error(), "seq") {
				t.Errorf("frame %s: %v", data, err)
			}
		}
		mu.Lock()
		frames = append(frames, f)
		mu.Unlock()
		if answer != nil {
			go func() {
				<-ready
				answer(run, f)
			}()
		}
	})
	close(ready)
	select {
	case <-run.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the run did not end")
	}
	mu.Lock()
	defer mu.Unlock()
	return frames
}

func kinds(frames []*agentproto.Frame) string {
	var out []string
	for _, f := range frames {
		s := f.Type
		if f.MinionID != "" {
			s += "@" + f.MinionID
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func last(frames []*agentproto.Frame) *agentproto.Frame { return frames[len(frames)-1] }

// A react agent completes a two-tool task with a model that answers in
// ReAct text: tools described in the system text, not offered as
// functions; a stop sequence; a made-up observation ignored; a format
// error fed back.
func TestReActAgent(t *testing.T) {
	url, rec := fake(t, providertest.Scripted(
		providertest.Reply{Chunks: []string{"Thought: I need the time.\nAction: clock\nAction Input: {}"}},
		providertest.Reply{Chunks: []string{"I am not sure what to do."}},
		providertest.Reply{Chunks: []string{"Thought: now the weather.\nAction: weather\nAction Input: {\"city\": \"Paris\"}\nObservation: rain (made up)"}},
		providertest.Reply{Chunks: []string{"Thought: I know it.\nFinal Answer: It is noon and sunny in Paris."}},
	))
	a := newAgent(t, url, "Reactor", `agent: {type: react}
tools:
  - name: clock
    description: Tells the time.
    lua: return "noon"
  - name: weather
    description: Tells the weather of a city.
    parameters: {type: object, properties: {city: {type: string}}, required: [city]}
    lua: return "sunny in " .. parameters.city
`)
	set, _ := NewSet(a)
	frames := collect(t, New(set), "Reactor", Request{Input: "What time is it, and how is the weather in Paris?", Chunks: true}, nil)
	end := last(frames)
	if end.Type != agentproto.TypeFinalResult || end.Result != "It is noon and sunny in Paris." {
		t.Fatalf("end %+v: %s", end, kinds(frames))
	}
	bodies := rec.Bodies()
	if len(bodies) != 4 {
		t.Fatalf("%d requests", len(bodies))
	}
	var first map[string]any
	json.Unmarshal(bodies[0], &first) //nolint:errcheck // test
	if first["tools"] != nil || fmt.Sprint(first["stop"]) != "[\nObservation:]" {
		t.Errorf("first request: tools %v, stop %q", first["tools"], first["stop"])
	}
	for _, want := range []string{"- clock: Tells the time.", "- weather: Tells the weather of a city.", "Final Answer:"} {
		if !strings.Contains(string(bodies[0]), want) {
			t.Errorf("the system text lacks %q", want)
		}
	}
	if !strings.Contains(string(bodies[1]), "Observation: noon") || !strings.Contains(string(bodies[2]), "Observation: Invalid format: there is neither an Action nor a Final Answer") {
		t.Errorf("observations: %s\n%s", bodies[1], bodies[2])
	}
	if !strings.Contains(string(bodies[3]), "Observation: sunny in Paris") || strings.Contains(string(bodies[3]), "made up") {
		t.Errorf("last request: %s", bodies[3])
	}
	var steps, results int
	for _, f := range frames {
		switch f.Type {
		case agentproto.TypeStep:
			steps++
			if (steps == 1 || steps == 3) && len(f.ToolCalls) != 1 {
				t.Errorf("step %d calls %+v", steps, f.ToolCalls)
			}
		case agentproto.TypeToolResult:
			results++
		}
	}
	if steps != 4 || results != 2 {
		t.Errorf("%d steps, %d tool results: %s", steps, results, kinds(frames))
	}
}

// A plan agent completes a three-task plan with two minions: the plan,
// a revision after each task, the final answer; each task is a minion
// run between minion_start and minion_result; the plan is kept in the
// context.
func TestPlanAgent(t *testing.T) {
	brain := func(turn providertest.Turn) providertest.Reply {
		user := turn.LastUser()
		switch {
		case strings.Contains(turn.System, "Break the objective"):
			return providertest.Reply{Chunks: []string{`{"tasks": [
				{"task": "find facts", "tool": "Researcher", "input": {"input": "facts about owls"}},
				{"task": "write a draft", "tool": "Writer", "input": {"input": "a draft about owls"}},
				{"task": "check the draft", "tool": "Researcher", "input": {"input": "check the draft"}}]}`}}
		case strings.Contains(turn.System, "Revise the tasks"):
			_, rest, ok := strings.Cut(user, "Tasks still to do: ")
			if !ok {
				return providertest.Reply{Chunks: []string{`{"tasks": []}`}}
			}
			return providertest.Reply{Chunks: []string{`{"tasks": ` + strings.TrimSpace(rest) + `}`}}
		case strings.Contains(turn.System, "Write the final answer"):
			return providertest.Reply{Chunks: []string{fmt.Sprintf("Owls, from %d results.", strings.Count(user, "echo: "))}}
		}
		return providertest.Echo(turn)
	}
	url, rec := fake(t, brain)
	planner := newAgent(t, url, "Planner", "agent:\n  type: plan\n  minions: [Researcher, Writer]\n")
	set, _ := NewSet(planner, newAgent(t, url, "Researcher", ""), newAgent(t, url, "Writer", ""))
	frames := collect(t, New(set), "Planner", Request{Input: "Write about owls", Context: map[string]any{"project": "birds"}}, nil)
	end := last(frames)
	if end.Type != agentproto.TypeFinalResult || end.Result != "Owls, from 3 results." {
		t.Fatalf("end %+v: %s", end, kinds(frames))
	}
	want := "run_started step minion_start@m1 step@m1 minion_result@m1 step minion_start@m2 step@m2 minion_result@m2 step minion_start@m3 step@m3 minion_result@m3 step step final_result"
	if got := kinds(frames); got != want {
		t.Errorf("frames\n%s, want\n%s", got, want)
	}
	var names []string
	for _, f := range frames {
		switch f.Type {
		case agentproto.TypeMinionStart:
			names = append(names, f.Name)
			if m, _ := f.Context.(map[string]any); m["project"] != "birds" {
				t.Errorf("minion context %v", f.Context)
			}
		case agentproto.TypeMinionResult:
			if f.IsError || !strings.HasPrefix(f.Result.(string), "echo: ") {
				t.Errorf("minion_result %+v", f)
			}
		}
	}
	if strings.Join(names, " ") != "Researcher Writer Researcher" {
		t.Errorf("minions %v", names)
	}
	ctx, _ := end.Context.(map[string]any)
	plan, _ := ctx["plan"].(map[string]any)
	if done, _ := plan["done"].([]any); ctx["project"] != "birds" || len(done) != 3 || len(plan["tasks"].([]any)) != 0 {
		t.Errorf("final context %v", end.Context)
	}
	if !strings.Contains(string(rec.Bodies()[0]), `"response_format":{"json_schema":{"name":"plan"`) {
		t.Errorf("the plan was not asked as structured output: %s", rec.Bodies()[0])
	}
}

// A local minion's failure is a failed call for the parent model, not
// a dead run; a local agent cannot call itself in a loop.
func TestLocalMinionFailure(t *testing.T) {
	url, _ := fake(t, providertest.Echo)
	loop := newAgent(t, url, "Loop", "agent: {minions: [Loop]}\n")
	set, _ := NewSet(loop)
	frames := collect(t, New(set), "Loop", Request{Input: `call Loop {"input":"x"}`}, nil)
	end := last(frames)
	if end.Type != agentproto.TypeFinalResult || !strings.Contains(end.Result.(string), "tool Loop said: The agent Loop failed (federation_refused): refused: Loop would call back into its own chain") {
		t.Fatalf("end %+v: %s", end, kinds(frames))
	}
	if got := kinds(frames); !strings.Contains(got, "run_started step minion_start@m1 error@m1 minion_result@m1 step final_result") {
		t.Errorf("frames %s", got)
	}
}

// The minion file of clippy's format loads; its errors name the file,
// the line and the key, and a tool name that names no tool is one.
func TestMinionFile(t *testing.T) {
	url, _ := fake(t, providertest.Echo)
	base, err := cartridge.Load("testdata/clippy.yml", func(name string) (string, bool) {
		if name == "OPENAI_API_ADDRESS" {
			return url, true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	list, err := LoadMinions(context.Background(), "testdata/specialized_minions.yaml", base, bot.Host{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range list {
		names = append(names, a.Name()+":"+a.Type)
	}
	if got := strings.Join(names, " "); got != "Writer:react Architect:functions Frontender:react QA:functions Investigator:react Editor:functions Devops:functions" {
		t.Errorf("agents %s", got)
	}
	w := list[0]
	if w.NoFeedback || !list[1].NoFeedback || strings.Join(w.Repr.RequiredTools, ",") != "ReadFile,WriteFile,Bash,Remember,GetPage" ||
		w.Bot.Cartridge.String("provider", "settings", "model") != "claude-2" || !strings.HasSuffix(w.Bot.Cartridge.Behavior("interaction").Directive, "finish the whole part you were given.") {
		t.Errorf("Writer: %+v", w.Repr)
	}
	if w.Source != "testdata/specialized_minions.yaml:5" {
		t.Errorf("source %s", w.Source)
	}
	// An agent of the file runs with its tools only.
	set, _ := NewSet(list...)
	frames := collect(t, New(set), "Editor", Request{Input: `call PatchFile {"input":"a.go"}`}, nil)
	if end := last(frames); end.Result != "tool PatchFile said: PatchFile: a.go" {
		t.Errorf("end %+v", end)
	}
	frames = collect(t, New(set), "Editor", Request{Input: `call Selenium {}`}, nil)
	if end := last(frames); !strings.Contains(fmt.Sprint(end.Result), "Unknown tool: Selenium") {
		t.Errorf("a tool outside tool_names: %+v", end)
	}

	dir := t.TempDir()
	for _, tc := range []struct{ file, want string }{
		{"- name: A\n  description: d\n  prompt: p\n  tool_names: [ReadFile, Teleport]\n", "bad.yaml:4: [0].tool_names[1]: Teleport is not a tool of testdata/clippy.yml (its tools are ReadFile, WriteFile"},
		{"- name: A\n  description: d\n  prompt: p\n", "bad.yaml:1: [0]: tool_names is missing"},
		{"- name: A\n  description: d\n  prompt: p\n  tool_names: []\n  temperature: 2\n", "bad.yaml:5: [0].temperature: unknown key"},
		{"- name: A\n  description: d\n  prompt: p\n  tool_names: []\n  use-openai-functions: maybe\n", "bad.yaml:5: [0].use-openai-functions: must be true or false"},
		{"name: A\n", "bad.yaml:1: a minion file is a list of agents"},
		// The guard of cartridges: too deep to parse safely.
		{"- name: A\n  description: d\n  prompt: p\n  tool_names: []\n  model: " + strings.Repeat("[", 200) + strings.Repeat("]", 200) + "\n", "bad.yaml:5: the YAML nests deeper than 100 levels"},
	} {
		path := filepath.Join(dir, "bad.yaml")
		os.WriteFile(path, []byte(tc.file), 0o644)
		_, err := LoadMinions(context.Background(), path, base, bot.Host{})
		if err == nil || !strings.Contains(strings.ReplaceAll(err.Error(), dir+"/", ""), tc.want) {
			t.Errorf("%q: %v, want %q", tc.file, err, tc.want)
		}
	}
}

// The default parameters are the sampling settings the cartridge sets,
// wherever its provider keeps them, and go back there.
func TestSamplingParameters(t *testing.T) {
	src := "provider:\n  id: ollama\n  settings: {model: m, options: {temperature: 1, num_predict: 10}, stream: true}\n"
	c, _ := cartridge.Parse([]byte(src), "o.yml", cartridge.FormatYAML, nil)
	schema, paths := samplingSchema(c)
	data, _ := json.Marshal(schema)
	if !strings.Contains(string(data), `"num_predict":{"description":"provider.settings.options.num_predict (the cartridge's: 10)","type":"integer"}`) ||
		!strings.Contains(string(data), `"temperature":{"description":"provider.settings.options.temperature (the cartridge's: 1)","type":"number"}`) || strings.Contains(string(data), "stream") {
		t.Errorf("schema %s", data)
	}
	a := &Agent{paramPaths: paths}
	if got, _ := json.Marshal(a.settingsFor(map[string]any{"temperature": 0.2})); string(got) != `{"options":{"temperature":0.2}}` {
		t.Errorf("settings %s", got)
	}
}

func TestLoadRemote(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hosts")
	os.WriteFile(path, []byte("# remote agent servers\nagents.example.com ENV/EX_TOKEN\n127.0.0.1:4000   # no token\nb.example:443 literal-token\n"), 0o600)
	env := func(n string) (string, bool) { return map[string]string{"EX_TOKEN": "from-env"}[n], n == "EX_TOKEN" }
	r, err := LoadRemote(path, env)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(r.AllowHosts, " ") != "agents.example.com 127.0.0.1:4000 b.example:443" || r.Tokens["agents.example.com"] != "from-env" ||
		r.Tokens["b.example:443"] != "literal-token" || len(r.Tokens) != 2 {
		t.Errorf("%+v", r)
	}
	for _, tc := range []struct{ file, want string }{
		{"a b c\n", "hosts:1: write a host and at most a token"},
		{"\nhttp://x\n", `hosts:2: "http://x" is not a host`},
		{"h ENV/NOPE\n", "hosts:1: the token of h is ENV/NOPE, but NOPE is not set"},
	} {
		os.WriteFile(path, []byte(tc.file), 0o600)
		if _, err := LoadRemote(path, env); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v", tc.file, err)
		}
	}
}

// The server does not ask its client to confirm calls of the client's
// own tools or of minions (docs/agent-protocol.md): the client decides
// about its tools, and a minion confirms the tools it runs. The
// agent's own tools are still confirmed.
func TestClientToolsAndMinionsNotConfirmed(t *testing.T) {
	url, _ := fake(t, providertest.Echo)
	src := fmt.Sprintf("meta: {name: Asker}\nagent: {minions: [Helper]}\nprovider:\n  id: openai\n  credentials: {address: %s, access-token: k}\n  settings: {model: gpt-4o}\ntools:\n  - name: own\n    lua: return 'own ran'\n", url)
	c, err := cartridge.Parse([]byte(src), "asker.yml", cartridge.FormatYAML, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bot.New(context.Background(), c, bot.Host{})
	if err != nil {
		t.Fatal(err)
	}
	asker, err := FromCartridge(b)
	if err != nil {
		t.Fatal(err)
	}
	set, _ := NewSet(asker, newAgent(t, url, "Helper", ""))
	answer := func(r *Run, f *agentproto.Frame) {
		switch f.Type {
		case agentproto.TypeToolCall:
			r.Deliver(&agentproto.Frame{Type: agentproto.TypeToolResult, ID: f.ID, Output: "the client's answer"})
		case agentproto.TypeConfirm:
			allow := true
			r.Deliver(&agentproto.Frame{Type: agentproto.TypeConfirmResult, ID: f.ID, Allow: &allow})
		}
	}
	tools := []agentproto.ToolRepr{{Name: "lookup", Description: "the client's"}}
	for input, confirms := range map[string]int{`call lookup {"q":"x"}`: 0, `call Helper {"input":"x"}`: 0, `call own {}`: 1} {
		frames := collect(t, New(set), "Asker", Request{Input: input, Tools: tools}, answer)
		var asked []string
		for _, f := range frames {
			if f.Type == agentproto.TypeConfirm {
				asked = append(asked, f.Name)
			}
		}
		if len(asked) != confirms {
			t.Errorf("%s: confirm frames for %v, want %d: %s", input, asked, confirms, kinds(frames))
		}
		if end := last(frames); end.Type != agentproto.TypeFinalResult {
			t.Errorf("%s: end %+v", input, end)
		}
	}
}

// A minion file that fails to load leaves nothing running: the bots
// of the agents read before the mistake are closed (their MCP
// sessions ended), as the base cartridge's is.
func TestMinionFileErrorClosesBots(t *testing.T) {
	url, _ := fake(t, providertest.Echo)
	s := sdk.NewServer(&sdk.Implementation{Name: "pinger", Version: "1.0"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "ping", Description: "Answers pong."}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "pong"}}}, nil, nil
	})
	handler := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil)
	var mu sync.Mutex
	sessions := map[string]bool{} // id -> closed
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id := r.Header.Get("Mcp-Session-Id"); id != "" {
			mu.Lock()
			sessions[id] = sessions[id] || r.Method == http.MethodDelete
			mu.Unlock()
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	src := fmt.Sprintf("meta: {name: Base}\nprovider:\n  id: openai\n  credentials: {address: %s, access-token: k}\n  settings: {model: gpt-4o}\nmcp:\n  remote: {url: %s}\n", url, hs.URL)
	base, err := cartridge.Parse([]byte(src), "base.yml", cartridge.FormatYAML, nil)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "minions.yaml")
	os.WriteFile(path, []byte("- name: A\n  description: d\n  prompt: p\n  tool_names: []\n- name: B\n  description: d\n  prompt: p\n  tool_names: [Teleport]\n"), 0o600) //nolint:errcheck // read below
	if _, err := LoadMinions(context.Background(), path, base, bot.Host{AllowMCP: true}); err == nil || !strings.Contains(err.Error(), "Teleport is not a tool") {
		t.Fatalf("LoadMinions: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	closed := 0
	for _, c := range sessions {
		if c {
			closed++
		}
	}
	if len(sessions) != 2 || closed != 2 {
		t.Errorf("%d MCP sessions opened (the base's and agent A's), %d closed", len(sessions), closed)
	}
}
