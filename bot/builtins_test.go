package bot

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/tool"
)

// scripted is a scripted model that records what it was asked.
type scripted struct {
	mu      sync.Mutex
	replies []providertest.Reply
	turns   []providertest.Turn
}

func (s *scripted) brain(t providertest.Turn) providertest.Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.turns = append(s.turns, t)
	if len(s.replies) == 0 {
		return providertest.Reply{Chunks: []string{"(the script is over)"}}
	}
	r := s.replies[0]
	s.replies = s.replies[1:]
	return r
}

// toolResults are the tool messages of a turn, in order.
func toolResults(t providertest.Turn) []string {
	var out []string
	for _, m := range t.Messages {
		if m.Role == "tool" {
			out = append(out, m.Content)
		}
	}
	return out
}

func call(name string, args map[string]any) providertest.Reply {
	b, _ := json.Marshal(args)
	return providertest.Reply{Calls: []providertest.Call{{Name: name, Arguments: string(b)}}}
}

func text(s string) providertest.Reply { return providertest.Reply{Chunks: providertest.Split(s, 5)} }

// recorder approves every call and remembers which it was asked about.
type recorder struct {
	mu    sync.Mutex
	asked []string
	texts []string
	deny  bool
}

func (r *recorder) Confirm(_ context.Context, c tool.Call, text string) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, c.Name)
	r.texts = append(r.texts, text)
	return !r.deny, nil
}

// copyTree copies the folder src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCodingAgentExample runs examples/coding-agent.yml end to end
// against a scripted model: it finds and reads the code, runs the failing
// tests, edits the bug away and runs them again, through the real tools
// (exec runs the real go test, under bubblewrap when it works here).
func TestCodingAgentExample(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("SKIPPING: no go command to run the example project's tests")
	}
	goCache, _ := exec.Command(goBin, "env", "GOCACHE").Output()
	dir := t.TempDir()
	copyTree(t, "../examples/coding-agent", filepath.Join(dir, "coding-agent"))
	src, err := os.ReadFile("../examples/coding-agent.yml")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "coding-agent.yml"), src, 0o644)
	// The cartridge lets commands write ~/.cache/go-build: point it at
	// this machine's build cache, so go test does not rebuild the world.
	home := filepath.Join(dir, "home")
	os.MkdirAll(filepath.Join(home, ".cache"), 0o755)
	if c := strings.TrimSpace(string(goCache)); c != "" {
		os.Symlink(c, filepath.Join(home, ".cache", "go-build"))
	}

	s := &scripted{replies: []providertest.Reply{
		call("glob", map[string]any{"pattern": "**/*.go"}),
		call("read_file", map[string]any{"path": "stats.go"}),
		call("exec", map[string]any{"command": "go test ./..."}),
		// The example's model is OpenAI's: its files profile edits with
		// apply_patch.
		call("apply_patch", map[string]any{"input": "*** Begin Patch\n*** Update File: stats.go\n@@\n \tfor _, x := range xs {\n \t\tsum += x\n \t}\n-\treturn sum / float64(len(xs)-1), nil\n+\treturn sum / float64(len(xs)), nil\n }\n*** End Patch\n"}),
		call("exec", map[string]any{"command": "go test ./... && go vet ./..."}),
		text("Mean divided the sum by one value too few. I changed it to divide by len(xs); go test and go vet pass."),
	}}
	url := fakeOpenAI(t, s.brain)
	h := Host{Environ: []string{
		"PATH=" + filepath.Dir(goBin) + ":/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "LANG=C.UTF-8",
		"OPENAI_API_ADDRESS=" + url, "OPENAI_API_KEY=sk-test",
	}}
	c, err := h.Load(filepath.Join(dir, "coding-agent.yml"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(context.Background(), c, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("exec: %s", b.Builtins().Exec)

	conf := &recorder{}
	var feedback []string
	x := Exchange{Mode: cartridge.Eval, Confirmer: conf, OnEvent: func(ev agent.Event) {
		if ev.Kind == agent.Feedback && ev.Action == cartridge.Responding {
			feedback = append(feedback, ev.Call.Name)
		}
	}}
	res, err := b.Ask(context.Background(), x, "The tests fail: fix the bug.")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Text, "Mean divided the sum by one value too few.") {
		t.Errorf("answer = %q", res.Text)
	}
	if len(s.turns) != 6 {
		t.Fatalf("%d requests, want 6", len(s.turns))
	}
	results := toolResults(s.turns[5])
	if len(results) != 5 {
		t.Fatalf("%d tool results, want 5: %q", len(results), results)
	}
	checks := []struct {
		what string
		want []string
	}{
		{"glob", []string{"stats.go", "stats_test.go"}},
		{"read_file", []string{"21| \treturn sum / float64(len(xs)-1), nil", "(End of file: 37 lines.)"}},
		{"the failing go test", []string{"--- FAIL: TestMean", "FAIL", "Exit code: 1"}},
		{"apply_patch", []string{"Done. The patch changed:\nM stats.go"}},
		{"the passing go test", []string{"ok  \texample.com/stats", "Exit code: 0"}},
	}
	for i, c := range checks {
		for _, w := range c.want {
			if !strings.Contains(results[i], w) {
				t.Errorf("%s: the result lacks %q:\n%s", c.what, w, results[i])
			}
		}
	}
	fixed, _ := os.ReadFile(filepath.Join(dir, "coding-agent", "stats.go"))
	if !strings.Contains(string(fixed), "return sum / float64(len(xs)), nil") {
		t.Errorf("stats.go was not fixed:\n%s", fixed)
	}
	// Reading ran unasked; the edit and the commands were confirmed.
	if want := []string{"exec", "apply_patch", "exec"}; !slices.Equal(conf.asked, want) {
		t.Errorf("confirmations asked for %v, want %v", conf.asked, want)
	}
	if want := []string{"glob", "read_file", "exec", "apply_patch", "exec"}; !slices.Equal(feedback, want) {
		t.Errorf("feedback for %v, want %v", feedback, want)
	}
	// The example itself is untouched.
	if orig, _ := os.ReadFile("../examples/coding-agent/stats.go"); !strings.Contains(string(orig), "len(xs)-1") {
		t.Error("the test changed the example's own project")
	}
}

func spawnCartridge(t *testing.T, url, builtins string) *cartridge.Cartridge {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("the answer is 42\n"), 0o644)
	src := "meta: {author: test, name: spawner, version: 1.0.0}\n" +
		"provider:\n  id: openai\n  credentials: {address: " + url + ", access-token: k}\n  settings: {model: gpt-4o}\n" +
		"builtins:\n" + builtins
	path := filepath.Join(dir, "bot.yml")
	os.WriteFile(path, []byte(src), 0o644)
	c, err := cartridge.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSpawn: the model hands a task to a sub-agent with a restricted tool
// set; the sub-agent works in a fresh conversation, its steps show in the
// parent's feedback, its final answer is the spawn call's result.
func TestSpawn(t *testing.T) {
	s := &scripted{replies: []providertest.Reply{
		call("spawn", map[string]any{"task": "Read notes.txt and say the answer.", "tools": []string{"read_file"}}),
		call("read_file", map[string]any{"path": "notes.txt"}), // the sub-agent
		text("The notes say 42."),       // the sub-agent's answer
		text("The sub-agent found 42."), // the parent
	}}
	url := fakeOpenAI(t, s.brain)
	b, err := New(context.Background(), spawnCartridge(t, url, "  files: true\n  spawn: {max-depth: 1}\n"), Host{})
	if err != nil {
		t.Fatal(err)
	}
	conf := &recorder{}
	var feedback []string
	x := Exchange{Mode: cartridge.Eval, Confirmer: conf, OnEvent: func(ev agent.Event) {
		switch ev.Kind {
		case agent.Feedback:
			feedback = append(feedback, string(ev.Action)+" "+ev.Call.Name)
		case agent.TextDelta, agent.Answer:
			feedback = append(feedback, "text "+ev.Text)
		}
	}}
	res, err := b.Ask(context.Background(), x, "What is the answer?")
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "The sub-agent found 42." {
		t.Errorf("answer = %q", res.Text)
	}
	if len(s.turns) != 4 {
		t.Fatalf("%d requests, want 4", len(s.turns))
	}
	parent, sub, parent2 := s.turns[0], s.turns[1], s.turns[3]
	if !slices.Contains(parent.Tools, "spawn") || !slices.Contains(parent.Tools, "read_file") {
		t.Errorf("the parent is offered %v", parent.Tools)
	}
	if !slices.Equal(sub.Tools, []string{"read_file"}) {
		t.Errorf("the sub-agent is offered %v, want only read_file", sub.Tools)
	}
	if sub.LastUser() != "Read notes.txt and say the answer." || strings.Contains(sub.LastUser()+sub.Messages[0].Content, "What is the answer?") {
		t.Errorf("the sub-agent's conversation is not fresh: %+v", sub.Messages)
	}
	if r := toolResults(parent2); len(r) != 1 || r[0] != "The notes say 42." {
		t.Errorf("the spawn result = %q", r)
	}
	if r := toolResults(s.turns[2]); len(r) != 1 || !strings.Contains(r[0], "1| the answer is 42") {
		t.Errorf("the sub-agent's read_file result = %q", r)
	}
	// spawn asks; the sub-agent's read_file does not.
	if !slices.Equal(conf.asked, []string{"spawn"}) {
		t.Errorf("confirmations: %v", conf.asked)
	}
	// The sub-agent's step shows in the parent's feedback, before the
	// spawn call's own; its answer is not streamed as the parent's text.
	joined := strings.Join(feedback, "\n")
	if !strings.Contains(joined, "responding read_file\nresponding spawn") {
		t.Errorf("the sub-agent's steps are not in the parent's feedback:\n%s", joined)
	}
	var streamed strings.Builder
	for _, f := range feedback {
		if s, ok := strings.CutPrefix(f, "text "); ok {
			streamed.WriteString(s)
		}
	}
	if streamed.String() != "The sub-agent found 42." {
		t.Errorf("the parent's text is %q: only its own answer may be streamed", streamed.String())
	}
}

// TestSpawnSharesProjectContext: a sub-agent is told the project context
// its parent's exchange gathered (the git summary runs git: once an
// exchange, not once a spawn); the next exchange gathers it anew.
func TestSpawnSharesProjectContext(t *testing.T) {
	s := &scripted{replies: []providertest.Reply{
		call("spawn", map[string]any{"task": "Say hi.", "tools": []string{"read_file"}}),
		text("hi"),   // the sub-agent
		text("done"), // the parent
		text("again"),
	}}
	var agents string
	brain := func(turn providertest.Turn) providertest.Reply {
		if len(s.turns) == 0 {
			// The parent's prompt is built: the project changes under it.
			os.WriteFile(agents, []byte("Rule two.\n"), 0o644)
		}
		return s.brain(turn)
	}
	url := fakeOpenAI(t, brain)
	c := spawnCartridge(t, url, "  files: true\n  spawn: {max-depth: 1}\n")
	agents = filepath.Join(filepath.Dir(c.Path), "AGENTS.md")
	os.WriteFile(agents, []byte("Rule one.\n"), 0o644)
	b, err := New(context.Background(), c, Host{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, input := range []string{"Spawn.", "Again."} {
		if _, err := b.Ask(context.Background(), Exchange{Mode: cartridge.Eval, Confirmer: &recorder{}}, input); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.turns) != 4 {
		t.Fatalf("%d requests, want 4", len(s.turns))
	}
	for i, want := range []string{"Rule one.", "Rule one.", "Rule one.", "Rule two."} {
		if sys := s.turns[i].Messages[0].Content; !strings.Contains(sys, want) {
			t.Errorf("request %d: the system prompt lacks %q:\n%s", i, want, sys)
		}
	}
}

// TestSpawnDepth: a sub-agent is offered spawn only below max-depth, and
// a tool name it may not use is refused with the list of those it may.
func TestSpawnDepth(t *testing.T) {
	s := &scripted{replies: []providertest.Reply{
		call("spawn", map[string]any{"task": "level 1"}), // depth 0
		call("spawn", map[string]any{"task": "level 2"}), // depth 1
		text("level 2 done"),                             // depth 2: no spawn offered
		text("level 1 done"),
		call("spawn", map[string]any{"task": "x", "tools": []string{"exec"}}),
		text("top done"),
	}}
	url := fakeOpenAI(t, s.brain)
	b, err := New(context.Background(), spawnCartridge(t, url, "  files: {write: false}\n  spawn: {max-depth: 2}\n"), Host{})
	if err != nil {
		t.Fatal(err)
	}
	x := Exchange{Mode: cartridge.Eval, Confirmer: &recorder{}}
	res, err := b.Ask(context.Background(), x, "go")
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != "top done" {
		t.Errorf("answer = %q", res.Text)
	}
	offered := func(i int) bool { return slices.Contains(s.turns[i].Tools, "spawn") }
	if !offered(0) || !offered(1) || offered(2) {
		t.Errorf("spawn offered at depths 0, 1, 2: %v %v %v; want true true false", offered(0), offered(1), offered(2))
	}
	if r := toolResults(s.turns[3]); len(r) != 1 || r[0] != "level 2 done" {
		t.Errorf("level 1 got %q", r)
	}
	r := toolResults(s.turns[5])
	if len(r) != 2 || !strings.Contains(r[1], `unknown tool "exec": a sub-agent here can use glob, grep, list_dir, read_file, spawn`) {
		t.Errorf("a tool the sub-agent may not use: %q", r)
	}
}

// TestOwnToolWins: a cartridge tool with a built-in's name replaces it,
// with a warning.
func TestOwnToolWins(t *testing.T) {
	s := &scripted{replies: []providertest.Reply{call("read_file", map[string]any{"path": "x"}), text("done")}}
	url := fakeOpenAI(t, s.brain)
	c := cartridgeFor(t, url, "builtins: {files: true}\ntools:\n- name: read_file\n  lua: return 'mine'\n")
	var warnings []string
	b, err := New(context.Background(), c, Host{Warn: func(m string) { warnings = append(warnings, m) }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Ask(context.Background(), Exchange{Mode: cartridge.Eval}, "go"); err != nil {
		t.Fatal(err)
	}
	if r := toolResults(s.turns[1]); len(r) != 1 || r[0] != "mine" {
		t.Errorf("read_file answered %q, want the cartridge's own tool", r)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "the cartridge's own tool read_file replaces the built-in one") {
		t.Errorf("warnings = %q", warnings)
	}
}

// TestExecWarning: the confirmation of a command that looks dangerous
// says so.
func TestExecWarning(t *testing.T) {
	s := &scripted{replies: []providertest.Reply{
		call("exec", map[string]any{"command": "rm -rf build"}),
		call("exec", map[string]any{"command": "ls"}),
		text("done"),
	}}
	url := fakeOpenAI(t, s.brain)
	b, err := New(context.Background(), spawnCartridge(t, url, "  exec: {sandbox: off}\n"), Host{Environ: []string{"PATH=/usr/bin:/bin"}})
	if err != nil {
		t.Fatal(err)
	}
	conf := &recorder{deny: true}
	if _, err := b.Ask(context.Background(), Exchange{Mode: cartridge.Eval, Confirmer: conf}, "go"); err != nil {
		t.Fatal(err)
	}
	if len(conf.texts) != 2 || !strings.HasSuffix(conf.texts[0], "[warning: recursive or forced delete (rm -r/-f)]") || strings.Contains(conf.texts[1], "warning") {
		t.Errorf("confirmation texts = %q", conf.texts)
	}
}

// TestSpawnKeepsTheToolFilter: a sub-agent gets none of the tools its
// parent's exchange was denied (a gateway guest without write_file
// cannot spawn a sub-agent that writes).
func TestSpawnKeepsTheToolFilter(t *testing.T) {
	s := &scripted{replies: []providertest.Reply{
		call("spawn", map[string]any{"task": "Write x.txt."}),
		text("I have no write tool."), // the sub-agent
		text("done"),                  // the parent
	}}
	url := fakeOpenAI(t, s.brain)
	b, err := New(context.Background(), spawnCartridge(t, url, "  files: {write: true}\n  spawn: {max-depth: 1}\n"), Host{})
	if err != nil {
		t.Fatal(err)
	}
	x := Exchange{Mode: cartridge.Eval, Confirmer: &recorder{}, ToolFilter: func(tl tool.Tool) bool { return tl.Spec().Name != "write_file" }}
	if _, err := b.Ask(context.Background(), x, "go"); err != nil {
		t.Fatal(err)
	}
	if len(s.turns) != 3 {
		t.Fatalf("%d requests, want 3", len(s.turns))
	}
	if parent, sub := s.turns[0], s.turns[1]; slices.Contains(parent.Tools, "write_file") || slices.Contains(sub.Tools, "write_file") || !slices.Contains(sub.Tools, "read_file") {
		t.Fatalf("the parent is offered %v, the sub-agent %v", parent.Tools, sub.Tools)
	}
}

// read_file's pictures reach a model that takes images (OpenAI's API:
// in a user message after the tool's result, as the fake decodes it
// from the wire); builtins.files.images: false keeps them out.
func TestReadFileImageReachesTheModel(t *testing.T) {
	png := "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\rIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00\x00\x00IEND\xaeB`\x82"
	for _, tc := range []struct{ setting, want string }{
		{"", "[image image/png 67 bytes]"},
		{", images: false", "is a binary file"},
	} {
		ws := t.TempDir()
		if err := os.WriteFile(filepath.Join(ws, "logo.png"), []byte(png), 0o644); err != nil {
			t.Fatal(err)
		}
		url := fakeOpenAI(t, providertest.Echo)
		c := cartridgeFor(t, url, "builtins: {files: {workspace: "+ws+tc.setting+"}}\n")
		b, err := New(context.Background(), c, Host{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := b.Ask(context.Background(), Exchange{Mode: cartridge.Eval}, `call read_file {"path":"logo.png"}`)
		b.Close()
		if err != nil || !strings.Contains(res.Text, tc.want) {
			t.Errorf("images%q: %+v %v", tc.setting, res, err)
		}
	}
}
