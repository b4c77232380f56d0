package robopage

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// writeTree writes files (path → content) below a new folder.
func writeTree(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const echoPage = `description: A test page
functions:
  %s:
    description: Echo a message.
    parameters:
      message:
        type: string
        description: What to print.
    cmdline: [echo, "${message}"]
`

func page(fn string) string { return strings.Replace(echoPage, "%s", fn, 1) }

func TestLoadNamesAndCategories(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"page1.yml":              page("duplicate_function"),
		"a/b/page2.yml":          page("duplicate_function"),
		"a/other.yaml":           page("ignored_yaml"),
		".hidden/page3.yml":      page("hidden_function"),
		"a/.hidden/page4.yml":    page("hidden_function2"),
		"a/.page5.yml":           page("hidden_file"),
		"c/named.yml":            "name: Custom\ncategories: [x, y]\n" + page("custom"),
		"c/notes.txt":            "not a page",
		"c/nested/deep/last.yml": page("last"),
	})
	lib, err := Load(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Rel, Name  string
		Categories []string
		Functions  []string
	}
	var got []row
	for _, p := range lib.Pages {
		r := row{Rel: p.Rel, Name: p.Name, Categories: p.Categories}
		for _, f := range p.Functions {
			r.Functions = append(r.Functions, f.Name)
		}
		got = append(got, r)
	}
	want := []row{
		{"a/b/page2.yml", "page2", []string{"a", "b"}, []string{"duplicate_function"}},
		{"c/named.yml", "Custom", []string{"x", "y"}, []string{"custom"}},
		{"c/nested/deep/last.yml", "last", []string{"c", "nested", "deep"}, []string{"last"}},
		{"page1.yml", "page1", nil, []string{"page1_duplicate_function"}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("pages (-want +got):\n%s", d)
	}
	if len(lib.Problems) != 1 || lib.Problems[0].Severity != Warning ||
		lib.Problems[0].Message != "function name duplicate_function is already used by a/b/page2.yml: served as page1_duplicate_function" {
		t.Errorf("problems: %v", lib.Problems)
	}
	if f, ok := lib.Function("page1_duplicate_function"); !ok || f.Key != "duplicate_function" {
		t.Errorf("renamed function lookup: %v %v", f, ok)
	}
	if _, ok := lib.Function("missing"); ok {
		t.Error("found a missing function")
	}

	// A filter keeps the pages whose path contains it.
	lib, err = Load(dir, "nested")
	if err != nil || len(lib.Pages) != 1 || lib.Pages[0].Name != "last" {
		t.Errorf("filtered load: %v %v", lib, err)
	}
	if _, err := Load(dir, "no_such_page"); err == nil || !strings.HasPrefix(err.Error(), "no pages found in ") {
		t.Errorf("empty filter result: %v", err)
	}
	// A single file has no categories.
	lib, err = Load(filepath.Join(dir, "c/nested/deep/last.yml"), "")
	if err != nil || len(lib.Pages) != 1 || lib.Pages[0].Categories != nil {
		t.Errorf("single file: %+v %v", lib.Pages[0], err)
	}
	// The root itself may be hidden.
	hidden := filepath.Join(t.TempDir(), ".robopages")
	os.MkdirAll(hidden, 0o755)
	os.WriteFile(filepath.Join(hidden, "p.yml"), []byte(page("f")), 0o644)
	if lib, err := Load(hidden, ""); err != nil || len(lib.Pages) != 1 {
		t.Errorf("hidden root: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "nope"), ""); err == nil || !errors.Is(err, ErrNoPages) || strings.Contains(err.Error(), "--path") {
		t.Errorf("missing path: %v", err)
	}
}

func TestLoadCwdAndEnvPath(t *testing.T) {
	dir := writeTree(t, map[string]string{"tools/p.yml": `description: in ${cwd}
functions:
  f:
    description: d
    parameters: {}
    container:
      build: {name: local, path: ${cwd}/x.Dockerfile}
      volumes: ["${cwd}:/data"]
    cmdline: [cat, "${cwd}/file"]
`})
	lib, err := Load(ExpandPath("$RP_TEST_DIR/tools", []string{"RP_TEST_DIR=" + dir}), "")
	if err != nil {
		t.Fatal(err)
	}
	canon, _ := filepath.EvalSymlinks(filepath.Join(dir, "tools"))
	f := lib.Pages[0].Functions[0]
	if lib.Pages[0].Description != "in "+canon || f.Cmdline[1] != canon+"/file" || f.Container.Build.Path != canon+"/x.Dockerfile" || f.Container.Volumes[0] != canon+":/data" {
		t.Errorf("${cwd} not replaced everywhere: %+v %+v", lib.Pages[0], f.Container)
	}
}

// A broken page is skipped with its file, line and reason; the others load.
func TestLoadBrokenPages(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"good.yml":        page("good"),
		"syntax.yml":      "description: x\nfunctions:\n  f: [\n",
		"empty.yml":       "# nothing\n",
		"list.yml":        "- a\n- b\n",
		"nofunctions.yml": "description: x\n",
		"nodesc.yml":      "functions:\n  f:\n    parameters: {}\n    cmdline: [echo]\n",
		"noparams.yml":    "functions:\n  f:\n    description: d\n    cmdline: [echo]\n",
		"notype.yml":      "functions:\n  f:\n    description: d\n    parameters:\n      a:\n        description: x\n    cmdline: [echo]\n",
		"nocmd.yml":       "functions:\n  f:\n    description: d\n    parameters: {}\n",
		"badcmd.yml":      "functions:\n  f:\n    description: d\n    parameters: {}\n    cmdline:\n      - echo\n      - {a: b}\n",
		"noimage.yml":     "functions:\n  f:\n    description: d\n    parameters: {}\n    container:\n      force: true\n    cmdline: [echo]\n",
		"badbool.yml":     "functions:\n  f:\n    description: d\n    parameters:\n      a: {type: string, description: x, required: maybe}\n    cmdline: [echo]\n",
		"twodocs.yml":     page("a") + "---\n" + page("b"),
		// Accepted: numbers in cmdline and examples, unknown keys, both
		// cmdline and platforms (the first written wins, with a warning).
		"lenient.yml": `description: lenient
references: [x]
functions:
  lenient:
    name: ignored
    description: d
    parameters:
      n: {type: integer, description: count, examples: [80, 443], default: 5}
    platforms: {linux: [echo, a]}
    cmdline: [echo, 2, true]
`,
	})
	lib, err := Load(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range lib.Functions() {
		names = append(names, f.Name)
	}
	if d := cmp.Diff([]string{"good", "lenient"}, names); d != "" {
		t.Errorf("loaded functions (-want +got):\n%s", d)
	}
	var got []string
	for _, p := range lib.Problems {
		got = append(got, p.Severity.String()+" "+strings.TrimPrefix(p.String(), dir+"/"))
	}
	want := []string{
		"error badbool.yml:5: f: parameter a: `required` must be true or false, not text",
		"error badcmd.yml:7: f: `cmdline` item 2 must be text, not a mapping",
		"error empty.yml: the page is empty: write a `description` and a `functions` mapping",
		"warning lenient.yml:10: lenient: both `cmdline` and `platforms` are given: `platforms` is used because it comes first, remove `cmdline`",
		"error list.yml:1: a page is a mapping with `description` and `functions`, not a list",
		"error nocmd.yml:2: f: no command line: add `cmdline` (a list, one argument per item) or `platforms`",
		"error nodesc.yml:2: f: missing `description`: say what the function does",
		"error nofunctions.yml:1: the page has no `functions`: add a `functions:` mapping of function name to description, parameters and cmdline",
		"error noimage.yml:5: f: `container` needs `image` (an image to pull) or `build` (a Dockerfile to build)",
		"error noparams.yml:2: f: missing `parameters`: declare the arguments, or write `parameters: {}` when there are none",
		"error notype.yml:5: f: parameter a has no `type`",
		"error syntax.yml:3: invalid YAML: sequence end token ']' not found",
		"error twodocs.yml:11: a page holds one YAML document, this file has 2: split it into one file per page",
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("problems (-want +got):\n%s", d)
	}
	f, _ := lib.Function("lenient")
	if d := cmp.Diff([]string{"80", "443"}, f.Parameters[0].Examples); d != "" || f.Platforms == nil || f.Cmdline != nil {
		t.Errorf("lenient: %+v %+v", f, f.Parameters[0])
	}
}

func TestExpandPath(t *testing.T) {
	env := []string{"HOME=/home/u", "DIR=/d", "ROBOPAGES_PATH=/pages"}
	for in, want := range map[string]string{"~": "/home/u", "~/x": "/home/u/x", "$DIR/a": "/d/a", "${DIR}/b": "/d/b", "$UNSET/c": "/c", "x~": "x~"} {
		if got := ExpandPath(in, env); got != want {
			t.Errorf("ExpandPath(%q) = %q, want %q", in, got, want)
		}
	}
	if got := DefaultPath(env); got != "/pages" {
		t.Errorf("DefaultPath = %q", got)
	}
	if got := DefaultPath(nil); got != "~/.robopages" {
		t.Errorf("DefaultPath(nil) = %q", got)
	}
}
