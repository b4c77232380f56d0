package files

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"bytes"
	"github.com/nbots/nb/media"
	"github.com/nbots/nb/tool"
	"image"
	"image/gif"
	"image/jpeg"
	pngenc "image/png"
)

// workspace makes a workspace in a temporary folder with the given files.
func workspace(t *testing.T, files map[string]string) *Workspace {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func run(t *testing.T, tl tool.Tool, args map[string]any) (string, error) {
	t.Helper()
	out, err := tl.Run(context.Background(), tool.Call{Name: tl.Spec().Name, Arguments: args})
	if err != nil {
		return "", err
	}
	s, ok := out.(string)
	if !ok {
		t.Fatalf("%s returned %T, want text", tl.Spec().Name, out)
	}
	return s, nil
}

func mustRun(t *testing.T, tl tool.Tool, args map[string]any) string {
	t.Helper()
	s, err := run(t, tl, args)
	if err != nil {
		t.Fatalf("%s %v: %v", tl.Spec().Name, args, err)
	}
	return s
}

// TestEscapes: every file tool refuses paths that leave the workspace,
// whatever the way out; nothing outside is read or written.
func TestEscapes(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret.txt")
	os.WriteFile(secret, []byte("TOP-SECRET\n"), 0o644)
	w := workspace(t, map[string]string{"inside.txt": "hello\n"})
	links := map[string]string{
		"etc":       "/etc",            // absolute link to a system folder
		"up":        "..",              // relative link to the parent
		"proc_root": "/proc/self/root", // the whole file system through /proc
		"secretln":  secret,            // absolute link to a file outside
		"rel_out":   "../" + filepath.Base(outside) + "/secret.txt",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(w.Dir(), name)); err != nil {
			t.Fatal(err)
		}
	}
	rel, _ := filepath.Rel(w.Dir(), secret)
	paths := []string{
		"../secret.txt", rel, "sub/../../x", secret, "/etc/passwd", "/etc",
		"etc/passwd", "etc", "up/" + filepath.Base(outside) + "/secret.txt", "up",
		"proc_root/etc/passwd", "/proc/self/root/etc/passwd", "/proc/self/root" + secret,
		"secretln", "rel_out", "~/.bashrc",
	}
	tools := map[string]func(p string) (string, error){
		"read_file": func(p string) (string, error) { return run(t, ReadFile(w), map[string]any{"path": p}) },
		"list_dir":  func(p string) (string, error) { return run(t, ListDir(w), map[string]any{"path": p}) },
		"glob":      func(p string) (string, error) { return run(t, Glob(w), map[string]any{"path": p, "pattern": "**"}) },
		"grep":      func(p string) (string, error) { return run(t, Grep(w), map[string]any{"path": p, "pattern": "."}) },
		"edit_file": func(p string) (string, error) {
			return run(t, EditFile(w), map[string]any{"path": p, "old_text": "TOP-SECRET", "new_text": "pwned"})
		},
		"write_file": func(p string) (string, error) {
			return run(t, WriteFile(w), map[string]any{"path": p, "content": "pwned"})
		},
	}
	for name, call := range tools {
		for _, p := range paths {
			out, err := call(p)
			if err == nil {
				t.Errorf("%s(%q) escaped the workspace: %.200q", name, p, out)
				continue
			}
			if strings.Contains(err.Error(), "TOP-SECRET") || strings.Contains(err.Error(), "root:") {
				t.Errorf("%s(%q) leaked outside content in its error: %v", name, p, err)
			}
		}
	}
	if b, _ := os.ReadFile(secret); string(b) != "TOP-SECRET\n" {
		t.Errorf("the file outside the workspace was changed: %q", b)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Errorf("something was created outside the workspace: %v", entries)
	}
	// The message says what happened and what to do.
	_, err := run(t, ReadFile(w), map[string]any{"path": "../secret.txt"})
	if err == nil || !strings.Contains(err.Error(), "outside the workspace") {
		t.Errorf("read_file(../secret.txt) error = %v, want it to say the path is outside the workspace", err)
	}
	// A path inside the workspace, given absolute, works.
	if out := mustRun(t, ReadFile(w), map[string]any{"path": filepath.Join(w.Dir(), "inside.txt")}); !strings.Contains(out, "1| hello") {
		t.Errorf("absolute path inside the workspace: %q", out)
	}
}

// TestSymlinkSwap: a link swapped in while the tools run (between any
// check and the open) never lets them read or write outside. The swaps
// are renames, so the path always exists and flips between a file or
// folder inside and a link to the outside as fast as the kernel allows.
func TestSymlinkSwap(t *testing.T) {
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "passwd"), []byte("OUTSIDE-CONTENT\n"), 0o644)
	w := workspace(t, map[string]string{"in/passwd": "inside\n"})

	var stop atomic.Bool
	var wg sync.WaitGroup
	swap := func(name, inside, link string) {
		defer wg.Done()
		p := filepath.Join(w.Dir(), name)
		for i := 0; !stop.Load(); i++ {
			tmp := p + ".swap"
			os.Remove(tmp)
			if i%2 == 0 {
				os.Symlink(inside, tmp)
			} else {
				os.Symlink(link, tmp)
			}
			os.Rename(tmp, p)
		}
	}
	wg.Add(2)
	go swap("d", "in", outside)                                 // a folder
	go swap("f", "in/passwd", filepath.Join(outside, "passwd")) // a file

	var reads, inside atomic.Int64
	try := func(tl tool.Tool, args map[string]any) {
		out, err := tl.Run(context.Background(), tool.Call{Arguments: args})
		s, _ := out.(string)
		if strings.Contains(s, "OUTSIDE-CONTENT") || (err != nil && strings.Contains(err.Error(), "OUTSIDE-CONTENT")) {
			t.Errorf("%s %v reached the file outside the workspace: %q", tl.Spec().Name, args, s)
		}
		if tl.Spec().Name == "read_file" {
			reads.Add(1)
			if err == nil {
				inside.Add(1)
			}
		}
	}
	var readers sync.WaitGroup
	deadline := time.Now().Add(1500 * time.Millisecond)
	for _, p := range []string{"d/passwd", "f"} {
		readers.Add(1)
		go func() {
			defer readers.Done()
			for time.Now().Before(deadline) && !t.Failed() {
				try(ReadFile(w), map[string]any{"path": p})
			}
		}()
	}
	readers.Add(1)
	go func() {
		defer readers.Done()
		for time.Now().Before(deadline) && !t.Failed() {
			try(Grep(w), map[string]any{"pattern": "OUTSIDE", "path": "d"})
			try(ListDir(w), map[string]any{"path": "d"})
			for _, p := range []string{"d/passwd", "f"} {
				try(EditFile(w), map[string]any{"path": p, "old_text": "OUTSIDE-CONTENT", "new_text": "changed"})
				try(WriteFile(w), map[string]any{"path": p, "content": "written\n"})
			}
		}
	}()
	readers.Wait()
	stop.Store(true)
	wg.Wait()
	if b, _ := os.ReadFile(filepath.Join(outside, "passwd")); string(b) != "OUTSIDE-CONTENT\n" {
		t.Errorf("the file outside was changed through a swapped link: %q", b)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 1 {
		t.Errorf("files were created outside through a swapped link: %v", entries)
	}
	if inside.Load() == 0 {
		t.Errorf("none of %d reads succeeded: the race was not exercised", reads.Load())
	}
	t.Logf("%d reads, %d of the file inside", reads.Load(), inside.Load())
}

func TestReadFile(t *testing.T) {
	var twenty strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&twenty, "line %d\n", i)
	}
	w := workspace(t, map[string]string{
		"twenty.txt": twenty.String(),
		"empty.txt":  "",
		"nonl.txt":   "a\nb",
		"crlf.txt":   "a\r\nb\r\n",
		"bin.dat":    "PK\x03\x04\x00\x00binary",
		"latin1.txt": "caf\xe9\n",
		"utf8.txt":   "café ☕\n",
		"long.txt":   strings.Repeat("x", 5000) + "\nshort\n",
		"dir/a.txt":  "a\n",
	})
	rf := ReadFile(w)
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"path": "twenty.txt", "offset": 5, "limit": 3}, "5| line 5\n6| line 6\n7| line 7\n(Showing lines 5-7 of 20. Use offset=8 to continue.)"},
		{map[string]any{"path": "twenty.txt", "offset": 19}, "19| line 19\n20| line 20\n(End of file: 20 lines.)"},
		{map[string]any{"path": "empty.txt"}, "(Empty file: empty.txt)"},
		{map[string]any{"path": "nonl.txt"}, "1| a\n2| b\n(End of file: 2 lines.)"},
		{map[string]any{"path": "nonl.txt", "limit": 1}, "1| a\n(Showing lines 1-1 of 2. Use offset=2 to continue.)"},
		{map[string]any{"path": "crlf.txt"}, "1| a\n2| b\n(End of file: 2 lines.)"},
		{map[string]any{"path": "utf8.txt"}, "1| café ☕\n(End of file: 1 lines.)"},
		{map[string]any{"path": "./dir/../dir/a.txt"}, "1| a\n(End of file: 1 lines.)"},
		{map[string]any{"path": "long.txt"}, "1| " + strings.Repeat("x", 2000) + " … [this line goes on for 3000 more bytes]\n2| short\n(End of file: 2 lines.)"},
	} {
		if got := mustRun(t, rf, tc.args); got != tc.want {
			t.Errorf("read_file %v:\n got %q\nwant %q", tc.args, got, tc.want)
		}
	}
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"path": "twenty.txt", "offset": 21}, "offset 21 is beyond the end of twenty.txt, which has 20 lines"},
		{map[string]any{"path": "bin.dat"}, "bin.dat is a binary file"},
		{map[string]any{"path": "latin1.txt"}, "latin1.txt is a binary file"},
		{map[string]any{"path": "missing.txt"}, "missing.txt: no such file or folder in the workspace"},
		{map[string]any{"path": "dir"}, "dir is a folder, not a file"},
		{map[string]any{"path": ""}, "the argument path is empty"},
		{map[string]any{}, "the argument path is missing"},
		{map[string]any{"path": "twenty.txt", "offset": "x"}, "the argument offset must be a whole number"},
	} {
		_, err := run(t, rf, tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("read_file %v: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestReadFileBudget: an answer over the budget keeps its first and last
// lines and says which lines were left out and how to read them.
func TestReadFileBudget(t *testing.T) {
	var b strings.Builder
	for i := 1; i <= 3000; i++ {
		fmt.Fprintf(&b, "%04d %s\n", i, strings.Repeat("y", 95))
	}
	w := workspace(t, map[string]string{"big.txt": b.String()})
	out := mustRun(t, ReadFile(w), map[string]any{"path": "big.txt"})
	if n := len([]rune(out)); n > 50_000 {
		t.Errorf("the answer has %d characters, over the model's 50,000", n)
	}
	for _, want := range []string{"1| 0001 ", "2000| 2000 ", "left out", "(Showing lines 1-2000 of 3000. Use offset=2001 to continue.)"} {
		if !strings.Contains(out, want) {
			t.Errorf("the answer lacks %q", want)
		}
	}
	if strings.Contains(out, "1000| 1000 ") {
		t.Error("the middle line 1000 was kept")
	}
}

func TestWriteFile(t *testing.T) {
	w := workspace(t, map[string]string{"old.txt": "old\n"})
	os.Chmod(filepath.Join(w.Dir(), "old.txt"), 0o600)
	wf := WriteFile(w)
	if got := mustRun(t, wf, map[string]any{"path": "a/b/new.txt", "content": "héllo\n"}); got != "Created a/b/new.txt (7 bytes)." {
		t.Errorf("write_file = %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(w.Dir(), "a/b/new.txt")); string(b) != "héllo\n" {
		t.Errorf("content = %q", b)
	}
	if got := mustRun(t, wf, map[string]any{"path": "old.txt", "content": "new\n"}); got != "Wrote old.txt (4 bytes)." {
		t.Errorf("write_file = %q", got)
	}
	info, _ := os.Stat(filepath.Join(w.Dir(), "old.txt"))
	if info.Mode().Perm() != 0o600 {
		t.Errorf("the file's mode became %v, want it kept (0600)", info.Mode().Perm())
	}
	entries, _ := os.ReadDir(w.Dir())
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("a temporary file was left behind: %s", e.Name())
		}
	}
	os.Symlink("old.txt", filepath.Join(w.Dir(), "link"))
	if _, err := run(t, wf, map[string]any{"path": "link", "content": "x"}); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("write_file through a link: %v", err)
	}
	if _, err := run(t, wf, map[string]any{"path": "a", "content": "x"}); err == nil || !strings.Contains(err.Error(), "is a folder") {
		t.Errorf("write_file over a folder: %v", err)
	}
}

func TestEditFile(t *testing.T) {
	w := workspace(t, map[string]string{
		"a.go":     "package a\n\nfunc A() int { return 1 }\n\nfunc B() int { return 1 }\n",
		"crlf.txt": "one\r\ntwo\r\nthree\r\n",
		"foo.txt":  "foo bar foo bar foo",
	})
	ef := EditFile(w)
	_, err := run(t, ef, map[string]any{"path": "a.go", "old_text": "return 1", "new_text": "return 2"})
	if err == nil || !strings.Contains(err.Error(), "old_text occurs 2 times in a.go, but must occur exactly once") {
		t.Errorf("ambiguous edit: %v", err)
	}
	_, err = run(t, ef, map[string]any{"path": "a.go", "old_text": "return 3", "new_text": "return 2"})
	if err == nil || !strings.Contains(err.Error(), "old_text was not found in a.go") {
		t.Errorf("missing text: %v", err)
	}
	out := mustRun(t, ef, map[string]any{"path": "a.go", "old_text": "func B() int { return 1 }", "new_text": "func B() int { return 2 }"})
	if !strings.HasPrefix(out, "Edited a.go: replaced 1 occurrence.\n") || !strings.Contains(out, "5| func B() int { return 2 }") {
		t.Errorf("edit answer = %q", out)
	}
	if b, _ := os.ReadFile(filepath.Join(w.Dir(), "a.go")); string(b) != "package a\n\nfunc A() int { return 1 }\n\nfunc B() int { return 2 }\n" {
		t.Errorf("a.go = %q", b)
	}
	mustRun(t, ef, map[string]any{"path": "crlf.txt", "old_text": "one\ntwo", "new_text": "1\n2"})
	if b, _ := os.ReadFile(filepath.Join(w.Dir(), "crlf.txt")); string(b) != "1\r\n2\r\nthree\r\n" {
		t.Errorf("crlf.txt = %q, want its CRLF kept", b)
	}
	out = mustRun(t, ef, map[string]any{"path": "foo.txt", "old_text": "foo", "new_text": "baz", "replace_all": true})
	if !strings.Contains(out, "replaced 3 occurrences") {
		t.Errorf("replace_all answer = %q", out)
	}
	if b, _ := os.ReadFile(filepath.Join(w.Dir(), "foo.txt")); string(b) != "baz bar baz bar baz" {
		t.Errorf("foo.txt = %q", b)
	}
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"path": "a.go", "old_text": "", "new_text": "x"}, "old_text is empty"},
		{map[string]any{"path": "a.go", "old_text": "x", "new_text": "x"}, "the same"},
		{map[string]any{"path": "a.go", "old_text": "package"}, "the argument new_text is missing"},
	} {
		if _, err := run(t, ef, tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("edit_file %v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

func TestListDir(t *testing.T) {
	w := workspace(t, map[string]string{"b.txt": "12345", "a/x": "", ".hidden": "h"})
	os.Symlink("b.txt", filepath.Join(w.Dir(), "c"))
	os.Mkdir(filepath.Join(w.Dir(), "empty"), 0o755)
	if got, want := mustRun(t, ListDir(w), nil), ".hidden (1 bytes)\na/\nb.txt (5 bytes)\nc -> b.txt\nempty/"; got != want {
		t.Errorf("list_dir = %q, want %q", got, want)
	}
	if got := mustRun(t, ListDir(w), map[string]any{"path": "empty"}); got != "(Empty folder: empty)" {
		t.Errorf("list_dir empty = %q", got)
	}
	if _, err := run(t, ListDir(w), map[string]any{"path": "b.txt"}); err == nil || !strings.Contains(err.Error(), "is a file") {
		t.Errorf("list_dir of a file: %v", err)
	}
}

func TestGlobAndGrepRespectGitignore(t *testing.T) {
	w := workspace(t, map[string]string{
		".gitignore":          "*.log\n/build/\nvendor\n!keep.log\n",
		"main.go":             "package main\n// TODO: one\n",
		"cmd/tool/main.go":    "package main\n// todo: two\n",
		"cmd/.gitignore":      "gen_*.go\n",
		"cmd/gen_x.go":        "// TODO: generated\n",
		"app.log":             "TODO: log\n",
		"keep.log":            "TODO: kept\n",
		"build/out.go":        "// TODO: built\n",
		"sub/build/in.go":     "// TODO: not root build\n",
		"vendor/v.go":         "// TODO: vendored\n",
		".git/config":         "TODO: git\n",
		"bin.dat":             "TODO\x00binary",
		"docs/readme.md":      "TODO: docs\n",
		"docs/deep/nested.go": "package deep\n",
	})
	got := mustRun(t, Glob(w), map[string]any{"pattern": "**/*.go"})
	files := strings.Split(got, "\n")
	want := map[string]bool{"main.go": true, "cmd/tool/main.go": true, "sub/build/in.go": true, "docs/deep/nested.go": true}
	if len(files) != len(want) {
		t.Errorf("glob **/*.go = %q, want %v", got, want)
	}
	for _, f := range files {
		if !want[f] {
			t.Errorf("glob returned %s", f)
		}
	}
	if got := mustRun(t, Glob(w), map[string]any{"pattern": "*.go"}); got != "main.go" {
		t.Errorf("glob *.go = %q, want only the top folder's main.go", got)
	}
	if got := mustRun(t, Glob(w), map[string]any{"pattern": "*.go", "path": "cmd/tool"}); got != "cmd/tool/main.go" {
		t.Errorf("glob *.go in cmd/tool = %q", got)
	}
	if got := mustRun(t, Glob(w), map[string]any{"pattern": "*.nothing"}); got != "No files match *.nothing in .." {
		t.Errorf("glob without match = %q", got)
	}
	if _, err := run(t, Glob(w), map[string]any{"pattern": "[a"}); err == nil {
		t.Error("glob accepted an invalid pattern")
	}

	got = mustRun(t, Grep(w), map[string]any{"pattern": "todo", "case_insensitive": true})
	wantLines := []string{"cmd/tool/main.go:2: // todo: two", "docs/readme.md:1: TODO: docs", "keep.log:1: TODO: kept", "main.go:2: // TODO: one", "sub/build/in.go:1: // TODO: not root build"}
	if got != strings.Join(wantLines, "\n") {
		t.Errorf("grep =\n%s\nwant\n%s", got, strings.Join(wantLines, "\n"))
	}
	if got := mustRun(t, Grep(w), map[string]any{"pattern": "TODO", "glob": "*.go"}); got != "main.go:2: // TODO: one\nsub/build/in.go:1: // TODO: not root build" {
		t.Errorf("grep with glob = %q", got)
	}
	if got := mustRun(t, Grep(w), map[string]any{"pattern": "TODO", "path": "cmd"}); got != "No matches for TODO in cmd." {
		t.Errorf("grep in cmd = %q (cmd/.gitignore must hide gen_x.go, and todo is lower case)", got)
	}
	if got := mustRun(t, Grep(w), map[string]any{"pattern": "generated", "path": "cmd/gen_x.go"}); got != "cmd/gen_x.go:1: // TODO: generated" {
		t.Errorf("grep of a named ignored file = %q", got)
	}
	if _, err := run(t, Grep(w), map[string]any{"pattern": "(unclosed"}); err == nil || !strings.Contains(err.Error(), "not a valid regular expression") {
		t.Errorf("grep with a bad pattern: %v", err)
	}
}

func TestGrepCap(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 500; i++ {
		b.WriteString("match\n")
	}
	w := workspace(t, map[string]string{"many.txt": b.String()})
	got := mustRun(t, Grep(w), map[string]any{"pattern": "match", "max_results": 10})
	lines := strings.Split(got, "\n")
	if len(lines) != 11 || !strings.Contains(lines[10], "Showing the first 10 matching lines") {
		t.Errorf("grep capped at 10: %d lines, last %q", len(lines), lines[len(lines)-1])
	}
	got = mustRun(t, Grep(w), map[string]any{"pattern": "match"})
	if n := strings.Count(got, "\n") + 1; n != grepDefault+1 {
		t.Errorf("grep default cap: %d lines", n)
	}
}

func TestIgnoreRules(t *testing.T) {
	parse := func(base string, lines ...string) *ignore {
		ig := &ignore{}
		for _, l := range lines {
			if r, ok := parseIgnoreLine(l, base); ok {
				ig.rules = append(ig.rules, r)
			}
		}
		return ig
	}
	for _, tc := range []struct {
		rules []string
		base  string
		name  string
		dir   bool
		want  bool
	}{
		{[]string{"*.o"}, ".", "a/b/c.o", false, true},
		{[]string{"*.o"}, ".", "c.go", false, false},
		{[]string{"/build"}, ".", "build", true, true},
		{[]string{"/build"}, ".", "sub/build", true, false},
		{[]string{"build/"}, ".", "build", false, false},
		{[]string{"build/"}, ".", "sub/build", true, true},
		{[]string{"doc/*.txt"}, ".", "doc/a.txt", false, true},
		{[]string{"doc/*.txt"}, ".", "doc/x/a.txt", false, false},
		{[]string{"doc/**/*.txt"}, ".", "doc/x/y/a.txt", false, true},
		{[]string{"**/logs"}, ".", "a/logs", true, true},
		{[]string{"abc/**"}, ".", "abc", true, false},
		{[]string{"abc/**"}, ".", "abc/x", false, true},
		{[]string{"*.log", "!keep.log"}, ".", "keep.log", false, false},
		{[]string{"!keep.log", "*.log"}, ".", "keep.log", false, true},
		{[]string{"# comment", "", "   "}, ".", "# comment", false, false},
		{[]string{`\#hash`}, ".", "#hash", false, true},
		{[]string{"{a,b}"}, ".", "a", false, false},
		{[]string{"{a,b}"}, ".", "{a,b}", false, true},
		{[]string{"x.go"}, "sub", "sub/x.go", false, true},
		{[]string{"x.go"}, "sub", "other/x.go", false, false},
		{[]string{"/x.go"}, "sub", "sub/deeper/x.go", false, false},
		{nil, ".", ".git", true, true},
	} {
		if got := parse(tc.base, tc.rules...).ignored(tc.name, tc.dir); got != tc.want {
			t.Errorf("rules %q in %s: ignored(%s, dir=%v) = %v, want %v", tc.rules, tc.base, tc.name, tc.dir, got, tc.want)
		}
	}
}

func TestToolKinds(t *testing.T) {
	w := workspace(t, nil)
	for _, tl := range append(Tools(w, true, ProfileNanobot), ApplyPatch(w), ProfileGemini.EditTool(w)) {
		name := tl.Spec().Name
		ro, isRO := tl.(tool.ReadOnly)
		wantRO := name != "write_file" && name != "edit_file" && name != "apply_patch" && name != "replace"
		if (isRO && ro.ReadOnly()) != wantRO {
			t.Errorf("%s: read-only = %v, want %v", name, isRO && ro.ReadOnly(), wantRO)
		}
		if _, ok := tl.(tool.Limited); !ok {
			t.Errorf("%s has no output limits", name)
		}
	}
	if n := len(Tools(w, false, ProfileNanobot)); n != 4 {
		t.Errorf("without write: %d tools, want 4", n)
	}
	want := map[string]tool.Limits{"read_file": {Chars: 50_000, Lines: ReadLines + 10}, "grep": {Chars: 20_000, Lines: 200, Tail: true}, "glob": {Chars: 20_000, Lines: 500, Tail: true}}
	for _, tl := range Tools(w, true, ProfileNanobot) {
		if l, ok := want[tl.Spec().Name]; ok && tl.(tool.Limited).OutputLimits() != l {
			t.Errorf("%s limits = %+v, want %+v", tl.Spec().Name, tl.(tool.Limited).OutputLimits(), l)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "nope")); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Open(missing) = %v", err)
	}
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o644)
	if _, err := Open(f); err == nil || !strings.Contains(err.Error(), "not a folder") {
		t.Errorf("Open(file) = %v", err)
	}
}

// The output limits are the agent-loop reference's table: grep and glob
// (20,000 characters), the editing tools (10,000) and write_file (1,000)
// keep the tail; read_file the head and the tail.
func TestOutputLimitModes(t *testing.T) {
	w := workspace(t, nil)
	want := map[string]tool.Limits{
		"grep": {Chars: 20_000, Lines: 200, Tail: true}, "glob": {Chars: 20_000, Lines: 500, Tail: true},
		"write_file": {Chars: 1000, Tail: true}, "apply_patch": {Chars: 10_000, Tail: true},
		"edit_file": {Chars: 10_000, Tail: true}, "replace": {Chars: 10_000, Tail: true},
	}
	seen := map[string]bool{}
	for _, p := range []Profile{ProfileOpenAI, ProfileAnthropic, ProfileGemini, ProfileNanobot} {
		for _, x := range Tools(w, true, p) {
			name := x.Spec().Name
			lim := x.(tool.Limited).OutputLimits()
			if w, ok := want[name]; ok {
				seen[name] = true
				if lim != w {
					t.Errorf("%s (%s): %+v, want %+v", name, p, lim, w)
				}
			} else if lim.Tail {
				t.Errorf("%s keeps the tail", name)
			}
		}
	}
	if len(seen) != len(want) {
		t.Errorf("tools seen: %v", seen)
	}
}

// pictures are one small file of each type read_file gives as an image,
// recognised by their bytes (the names do not say).
func pictures(t *testing.T) map[string]string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	var png, jpg, gifb bytes.Buffer
	if err := pngenc.Encode(&png, img); err != nil {
		t.Fatal(err)
	}
	if err := jpeg.Encode(&jpg, img, nil); err != nil {
		t.Fatal(err)
	}
	if err := gif.Encode(&gifb, img, nil); err != nil {
		t.Fatal(err)
	}
	// A WebP file: RIFF, its size, WEBP, then a VP8L chunk (lossless 1x1).
	webp := "RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00\x2f\x00\x00\x00\x10\x07\x10\x11\x11\x88\x88\xfe\x07\x00"
	return map[string]string{"a.data": png.String(), "b.jpg": jpg.String(), "c.gif": gifb.String(), "d.webp": webp, "notes.txt": "plain text\n"}
}

// With images allowed (models that take them), read_file answers a PNG,
// JPEG, GIF or WebP picture as an image part with its media type; a
// larger picture than media.MaxImageBytes is refused; text is text.
// Without, a picture is a binary file, refused as before.
func TestReadFileImages(t *testing.T) {
	files := pictures(t)
	files["big.png"] = files["a.data"] + strings.Repeat("\x00", media.MaxImageBytes)
	w := workspace(t, files)
	read := ReadFile(w)
	types := map[string]string{"a.data": "image/png", "b.jpg": "image/jpeg", "c.gif": "image/gif", "d.webp": "image/webp"}
	for name := range types {
		if _, err := run(t, read, map[string]any{"path": name}); err == nil || !strings.Contains(err.Error(), "binary file") {
			t.Errorf("%s without images: %v", name, err)
		}
	}
	w.AllowImages(true)
	if !strings.Contains(read.Spec().Description, "comes as an image") {
		t.Errorf("description: %s", read.Spec().Description)
	}
	for name, kind := range types {
		out, err := read.Run(context.Background(), tool.Call{Name: "read_file", Arguments: map[string]any{"path": name}})
		r, ok := out.(*tool.Result)
		if err != nil || !ok || len(r.Images) != 1 || r.Images[0].MediaType != kind || string(r.Images[0].Data) != files[name] || !strings.Contains(r.Text, kind) {
			t.Errorf("%s: %+v %v", name, out, err)
		}
	}
	if _, err := run(t, read, map[string]any{"path": "big.png"}); err == nil || !strings.Contains(err.Error(), "larger than the 5 MB") {
		t.Errorf("big.png: %v", err)
	}
	if out, err := run(t, read, map[string]any{"path": "notes.txt"}); err != nil || !strings.Contains(out, "plain text") {
		t.Errorf("notes.txt: %q %v", out, err)
	}
}
