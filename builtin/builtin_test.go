package builtin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/tool"
)

// load writes a cartridge into a fresh folder and loads it.
func load(t *testing.T, src string, env cartridge.Lookup) *cartridge.Cartridge {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "bot.yml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := cartridge.Load(path, env)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var environ = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent-home"}

func TestNoBuiltins(t *testing.T) {
	tools, st, err := FromCartridge(load(t, "provider: {id: openai}\n", nil), Options{Environ: environ})
	if err != nil || tools != nil || len(st.Lines()) != 0 {
		t.Errorf("FromCartridge = %v, %+v, %v; want nothing", tools, st, err)
	}
}

func TestAllGroups(t *testing.T) {
	c := load(t, `builtins:
  files: {workspace: ws}
  exec: {sandbox: off, timeout: 5}
  web:
    fetch: true
    search: {api-key: ENV/NB_TEST_NO_SUCH_KEY}
  spawn: {max-depth: 2}
`, func(string) (string, bool) { return "", false })
	ws := filepath.Join(filepath.Dir(c.Path), "ws")
	os.Mkdir(ws, 0o755)
	spawned := 0
	tools, st, err := FromCartridge(c, Options{Environ: environ, Spawn: func(ctx context.Context, task string, tools []string, depth int) (string, error) {
		spawned++
		return "done", nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"read_file", "list_dir", "glob", "grep", "write_file", "edit_file", "exec", "web_fetch", "web_search", "spawn"}
	if !slices.Equal(st.Tools, want) {
		t.Errorf("tools = %v, want %v", st.Tools, want)
	}
	if st.Workspace != ws || st.ExecWorkspace != ws {
		t.Errorf("workspaces = %s, %s; want %s (relative to the cartridge's folder)", st.Workspace, st.ExecWorkspace, ws)
	}
	lines := strings.Join(st.Lines(), "\n")
	for _, w := range []string{"exec: NOT sandboxed (sandbox: off)", "web_search: no API key (NB_TEST_NO_SUCH_KEY is not set)", "spawn: sub-agents may nest 2 deep", "files: workspace " + ws} {
		if !strings.Contains(lines, w) {
			t.Errorf("the status lacks %q:\n%s", w, lines)
		}
	}
	// Every tool registers under its own name, and the confirmation rule
	// holds: reading tools run without asking, the others ask.
	var set tool.Set
	for _, tl := range tools {
		set.Add(tl)
	}
	if set.Len() != len(want) {
		t.Errorf("the set holds %d tools", set.Len())
	}
	readOnly := map[string]bool{"read_file": true, "list_dir": true, "glob": true, "grep": true, "web_search": true}
	for _, tl := range tools {
		ro, ok := tl.(tool.ReadOnly)
		if got := ok && ro.ReadOnly(); got != readOnly[tl.Spec().Name] {
			t.Errorf("%s: read-only %v", tl.Spec().Name, got)
		}
		if _, ok := tl.(tool.Limited); !ok {
			t.Errorf("%s has no output limits", tl.Spec().Name)
		}
	}
	sp, _ := set.Lookup("spawn")
	if out, err := sp.Run(context.Background(), tool.Call{Arguments: map[string]any{"task": "x"}}); err != nil || out != "done" || spawned != 1 {
		t.Errorf("spawn = %v, %v (%d calls)", out, err, spawned)
	}
}

func TestExecWorkspaceDefaults(t *testing.T) {
	c := load(t, "builtins: {exec: {sandbox: off}}\n", nil)
	_, st, err := FromCartridge(c, Options{Environ: environ})
	if err != nil {
		t.Fatal(err)
	}
	if st.ExecWorkspace != filepath.Dir(c.Path) {
		t.Errorf("exec runs in %s, want the cartridge's folder %s", st.ExecWorkspace, filepath.Dir(c.Path))
	}
	home := t.TempDir()
	os.Mkdir(filepath.Join(home, "proj"), 0o755)
	c = load(t, "builtins: {files: {workspace: ~/proj, write: false}, exec: {sandbox: off}}\n", nil)
	_, st, err = FromCartridge(c, Options{Environ: []string{"PATH=/usr/bin:/bin", "HOME=" + home}})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(home, "proj"); st.Workspace != want || st.ExecWorkspace != want {
		t.Errorf("workspaces %s, %s; want %s", st.Workspace, st.ExecWorkspace, want)
	}
	if slices.Contains(st.Tools, "write_file") {
		t.Errorf("write: false still offers write_file: %v", st.Tools)
	}
}

func TestErrorsNameTheKey(t *testing.T) {
	c := load(t, "provider: {id: openai}\nbuiltins:\n  files:\n    workspace: missing-folder\n", nil)
	_, _, err := FromCartridge(c, Options{Environ: environ})
	var ce *cartridge.Error
	if !errors.As(err, &ce) || ce.Line != 4 || ce.Key != "builtins.files.workspace" || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("error = %v", err)
	}
	c = load(t, "builtins:\n  exec:\n    sandbox: maybe\n", nil)
	if _, _, err := FromCartridge(c, Options{Environ: environ}); err == nil || !strings.Contains(err.Error(), "bot.yml:3: builtins.exec.sandbox") {
		t.Errorf("error = %v", err)
	}
	c = load(t, "builtins:\n  files: {workspace: ~/x}\n", nil)
	if _, _, err := FromCartridge(c, Options{Environ: []string{"PATH=/bin"}}); err == nil || !strings.Contains(err.Error(), "HOME is not set") {
		t.Errorf("error = %v", err)
	}
}

// TestSpawnDepth: spawn is offered below max-depth only, and passes the
// sub-agent's depth and tools to the runtime.
func TestSpawnDepth(t *testing.T) {
	c := load(t, "builtins: {spawn: {max-depth: 2}}\n", nil)
	var gotDepth int
	var gotTools []string
	spawn := func(ctx context.Context, task string, tools []string, depth int) (string, error) {
		gotDepth, gotTools = depth, tools
		return "", nil
	}
	for depth, offered := range map[int]bool{0: true, 1: true, 2: false, 3: false} {
		tools, _, err := FromCartridge(c, Options{Spawn: spawn, Depth: depth})
		if err != nil {
			t.Fatal(err)
		}
		if (len(tools) == 1) != offered {
			t.Errorf("depth %d: spawn offered %v, want %v", depth, len(tools) == 1, offered)
		}
		if depth == 1 && offered {
			out, err := tools[0].Run(context.Background(), tool.Call{Arguments: map[string]any{"task": "t", "tools": []any{"read_file", "grep"}}})
			if err != nil || gotDepth != 2 || !slices.Equal(gotTools, []string{"read_file", "grep"}) {
				t.Errorf("spawn at depth 1 ran at depth %d with %v: %v, %v", gotDepth, gotTools, out, err)
			}
			if out != "(The sub-agent finished without an answer.)" {
				t.Errorf("empty answer = %q", out)
			}
		}
	}
	_, st, _ := FromCartridge(c, Options{})
	if !strings.Contains(strings.Join(st.Lines(), "\n"), "spawn: not offered") {
		t.Errorf("without a SpawnFunc the status does not say so: %v", st.Lines())
	}
	failing := func(ctx context.Context, task string, tools []string, depth int) (string, error) {
		return "", errors.New("the provider is down")
	}
	tools, _, _ := FromCartridge(c, Options{Spawn: failing})
	if _, err := tools[0].Run(context.Background(), tool.Call{Arguments: map[string]any{"task": "t"}}); err == nil || !strings.Contains(err.Error(), "the sub-agent failed: the provider is down") {
		t.Errorf("failing sub-agent: %v", err)
	}
	if _, err := tools[0].Run(context.Background(), tool.Call{Arguments: map[string]any{"task": " "}}); err == nil {
		t.Error("an empty task ran")
	}
}
