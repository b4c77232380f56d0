package robopage

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nbots/nb/tool"
)

// A robopage function as an agent tool: the spec has the openai schema,
// Run returns the /process content, and errors reach the model.
func TestLoadTools(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"cart/tools/echo.yml": page("say"),
		"cart/tools/more.yml": page("shout"),
		"cart/tools/bad.yml":  "functions: [",
	})
	if got := ResolvePath("~/x", "/base", []string{"HOME=/home/u"}); got != "/home/u/x" {
		t.Errorf("ResolvePath ~ = %s", got)
	}
	path := ResolvePath("tools", filepath.Join(dir, "cart"), nil)
	tools, problems, err := LoadTools(context.Background(), path, "echo", &Executor{Environ: os.Environ()})
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || problems[0].Severity != Error {
		t.Errorf("problems %v", problems)
	}
	if len(tools) != 1 {
		t.Fatalf("%d tools, want 1 (filter echo)", len(tools))
	}
	want := tool.Spec{Name: "say", Description: "Echo a message.", Parameters: map[string]any{
		"type":       "object",
		"properties": map[string]any{"message": map[string]any{"type": "string", "description": "What to print."}},
		"required":   []string{"message"},
	}}
	if d := cmp.Diff(want, tools[0].Spec()); d != "" {
		t.Errorf("spec (-want +got):\n%s", d)
	}
	var set tool.Set
	set.Add(tools[0])
	tl, ok := set.Lookup("Say")
	if !ok {
		t.Fatal("lookup")
	}
	out, err := tl.Run(context.Background(), tool.Call{ID: "1", Name: "say", Arguments: map[string]any{"message": 42.0}})
	if err != nil || out != "42\n" {
		t.Errorf("Run = %q, %v", out, err)
	}
	_, err = tl.Run(context.Background(), tool.Call{Name: "say", Arguments: map[string]any{}})
	if err == nil || err.Error() != "missing required argument message for function say" {
		t.Errorf("missing argument: %v", err)
	}
	_, err = tl.Run(context.Background(), tool.Call{Name: "say", Arguments: map[string]any{"message": []any{"a"}}})
	if err == nil {
		t.Error("a list argument ran")
	}
}
