package files

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"

	"github.com/nbots/nb/builtin/internal/arg"
	"github.com/nbots/nb/tool"
)

const (
	// listMax bounds list_dir's entries.
	listMax = 1000
	// globMax bounds glob's paths (the agent shows the model 500 lines).
	globMax = 499
	// grepDefault and grepMax bound grep's matches (the model sees 200 lines).
	grepDefault, grepMax = 100, 199
	// grepLineChars bounds the text of one matching line.
	grepLineChars = 300
)

// dirName resolves a folder argument (default: the workspace itself) to a
// clean slash path for the Root's fs.FS, after the Root has checked it.
func (w *Workspace) dirName(p string) (name string, info fs.FileInfo, err error) {
	if strings.TrimSpace(p) == "" {
		p = "."
	}
	name, err = w.path(p, false)
	if err != nil {
		return "", nil, err
	}
	info, err = w.root.Stat(name)
	if err != nil {
		return "", nil, w.pathError(p, err)
	}
	name = path.Clean(strings.ReplaceAll(name, `\`, "/"))
	if !fs.ValidPath(name) {
		return "", nil, fmt.Errorf("%s: give a path inside the workspace, relative to it", p)
	}
	return name, info, nil
}

// walk visits what lies below start (a clean slash path), skipping .git,
// what .gitignore files ignore, and symbolic links (never followed, so a
// walk cannot loop or leave the workspace). fn sees files and folders
// other than start.
func (w *Workspace) walk(ctx context.Context, start string, fn func(name string, d fs.DirEntry) error) error {
	fsys := w.root.FS()
	var ig ignore
	ig.loadParents(fsys, start)
	hidden := w.hider(start)
	return fs.WalkDir(fsys, start, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			if name == start {
				return err
			}
			return nil // an unreadable folder is skipped, as grep -r does
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if name != start {
			if d.Type()&fs.ModeSymlink != 0 || ig.ignored(name, d.IsDir()) || hidden(name) {
				if d.IsDir() {
					return fs.SkipDir
				}
				return nil
			}
		}
		if d.IsDir() {
			ig.load(fsys, name)
		}
		if name == start {
			return nil
		}
		return fn(name, d)
	})
}

// ListDir returns the list_dir tool.
func ListDir(w *Workspace) tool.Tool { return &listDir{w: w} }

type listDir struct{ w *Workspace }

func (t *listDir) Spec() tool.Spec {
	return tool.Spec{
		Name:        "list_dir",
		Description: "List a folder of the workspace: folders end with \"/\", files show their size, links their target.",
		Parameters:  listDirParams(),
	}
}

// listDirParams is list_dir's schema, built once on first use: a spec's Parameters are read-only
// (tool.Spec), and a turn asks every tool for its spec.
var listDirParams = sync.OnceValue(func() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"path": map[string]any{"type": "string", "description": "The folder, relative to the workspace (default: the workspace itself)."},
		},
	}
})

func (t *listDir) ReadOnly() bool { return true }

func (t *listDir) OutputLimits() tool.Limits { return tool.Limits{Chars: 20_000, Lines: listMax + 5} }

func (t *listDir) Run(ctx context.Context, call tool.Call) (any, error) {
	p, err := arg.String(call.Arguments, "path", false)
	if err != nil {
		return nil, err
	}
	w := t.w.in(ctx)
	name, info, err := w.dirName(p)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("%s is a file, not a folder: read it with read_file", p)
	}
	entries, err := fs.ReadDir(w.root.FS(), name)
	if err != nil {
		return nil, w.pathError(p, err)
	}
	hidden := w.hider(name)
	entries = slices.DeleteFunc(entries, func(e fs.DirEntry) bool { return hidden(path.Join(name, e.Name())) })
	if len(entries) == 0 {
		return fmt.Sprintf("(Empty folder: %s)", w.show(name)), nil
	}
	var b strings.Builder
	for i, e := range entries {
		if i == listMax {
			fmt.Fprintf(&b, "(%d more entries not shown: use glob or grep to find what you need)\n", len(entries)-listMax)
			break
		}
		switch {
		case e.IsDir():
			b.WriteString(e.Name() + "/\n")
		case e.Type()&fs.ModeSymlink != 0:
			to, _ := w.root.Readlink(path.Join(name, e.Name()))
			fmt.Fprintf(&b, "%s -> %s\n", e.Name(), to)
		default:
			if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
				fmt.Fprintf(&b, "%s (%d bytes)\n", e.Name(), fi.Size())
			} else {
				b.WriteString(e.Name() + "\n")
			}
		}
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// Glob returns the glob tool.
func Glob(w *Workspace) tool.Tool { return &globTool{w: w} }

type globTool struct{ w *Workspace }

func (t *globTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "glob",
		Description: "Find files of the workspace whose path matches a glob pattern: \"*\" matches within one folder name, \"**\" any number of folders, " +
			"\"?\" one character, \"[abc]\" and \"{a,b}\" alternatives. \"*.go\" matches in the folder itself only; \"**/*.go\" in every folder. " +
			"Files that .gitignore ignores are left out. Newest first.",
		Parameters: globParams(),
	}
}

// globParams is glob's schema, built once on first use: a spec's Parameters are read-only
// (tool.Spec), and a turn asks every tool for its spec.
var globParams = sync.OnceValue(func() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"pattern": map[string]any{"type": "string", "description": "The pattern, relative to path: e.g. **/*_test.go"},
			"path":    map[string]any{"type": "string", "description": "The folder to search, relative to the workspace (default: the workspace itself)."},
		},
		"required": []any{"pattern"},
	}
})

func (t *globTool) ReadOnly() bool { return true }

// OutputLimits: the attractor's 20,000 characters (the tail kept) and 500 lines.
func (t *globTool) OutputLimits() tool.Limits {
	return tool.Limits{Chars: 20_000, Lines: 500, Tail: true}
}

func (t *globTool) Run(ctx context.Context, call tool.Call) (any, error) {
	pattern, err := arg.String(call.Arguments, "pattern", true)
	if err != nil {
		return nil, err
	}
	p, err := arg.String(call.Arguments, "path", false)
	if err != nil {
		return nil, err
	}
	pattern = strings.TrimPrefix(pattern, "./")
	if pattern == "" || !doublestar.ValidatePattern(pattern) {
		return nil, fmt.Errorf("the pattern %q is not a valid glob: check its brackets and braces", pattern)
	}
	w := t.w.in(ctx)
	start, info, err := w.dirName(p)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("%s is a file, not a folder", p)
	}
	type hit struct {
		name string
		mod  time.Time
	}
	var hits []hit
	err = w.walk(ctx, start, func(name string, d fs.DirEntry) error {
		if d.IsDir() {
			return nil
		}
		rel := name
		if start != "." {
			rel = strings.TrimPrefix(name, start+"/")
		}
		if doublestar.MatchUnvalidated(pattern, rel) {
			var mod time.Time
			if fi, err := d.Info(); err == nil {
				mod = fi.ModTime()
			}
			hits = append(hits, hit{name, mod})
		}
		return nil
	})
	if err != nil {
		return nil, w.pathError(p, err)
	}
	if len(hits) == 0 {
		return fmt.Sprintf("No files match %s in %s.", pattern, w.show(start)), nil
	}
	sort.Slice(hits, func(i, j int) bool { // not slices.SortFunc: bench/README.md, "Binary: sorts"
		if c := hits[j].mod.Compare(hits[i].mod); c != 0 {
			return c < 0
		}
		return hits[i].name < hits[j].name
	})
	var b strings.Builder
	for i, h := range hits {
		if i == globMax {
			fmt.Fprintf(&b, "(%d more files match: narrow the pattern or the path)\n", len(hits)-globMax)
			break
		}
		b.WriteString(w.show(h.name) + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// Grep returns the grep tool.
func Grep(w *Workspace) tool.Tool { return &grepTool{w: w} }

type grepTool struct{ w *Workspace }

func (t *grepTool) Spec() tool.Spec {
	return tool.Spec{
		Name: "grep",
		Description: "Search the text files of the workspace for a regular expression (Go RE2 syntax). Answers \"path:line: text\" for each matching line. " +
			"Files that .gitignore ignores, binary files and .git are skipped.",
		Parameters: grepParams(),
	}
}

// grepParams is grep's schema, built once on first use: a spec's Parameters are read-only
// (tool.Spec), and a turn asks every tool for its spec.
var grepParams = sync.OnceValue(func() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"pattern":          map[string]any{"type": "string", "description": "The regular expression, e.g. func \\w+Handler"},
			"path":             map[string]any{"type": "string", "description": "The file or folder to search, relative to the workspace (default: the whole workspace)."},
			"glob":             map[string]any{"type": "string", "description": "Only search files matching this glob: *.go matches by file name, a pattern with / by path (e.g. cmd/**/*.go)."},
			"case_insensitive": map[string]any{"type": "boolean", "description": "Ignore case (default false)."},
			"max_results":      map[string]any{"type": "integer", "minimum": 1, "maximum": grepMax, "description": fmt.Sprintf("The most matching lines to return (default %d).", grepDefault)},
		},
		"required": []any{"pattern"},
	}
})

func (t *grepTool) ReadOnly() bool { return true }

// OutputLimits: the attractor's 20,000 characters (the tail kept) and 200 lines.
func (t *grepTool) OutputLimits() tool.Limits {
	return tool.Limits{Chars: 20_000, Lines: 200, Tail: true}
}

func (t *grepTool) Run(ctx context.Context, call tool.Call) (any, error) {
	expr, err := arg.String(call.Arguments, "pattern", true)
	if err != nil {
		return nil, err
	}
	p, err := arg.String(call.Arguments, "path", false)
	if err != nil {
		return nil, err
	}
	filter, err := arg.String(call.Arguments, "glob", false)
	if err != nil {
		return nil, err
	}
	fold, err := arg.Bool(call.Arguments, "case_insensitive", false)
	if err != nil {
		return nil, err
	}
	most, err := arg.Int(call.Arguments, "max_results", grepDefault, 1, 1_000_000)
	if err != nil {
		return nil, err
	}
	most = min(most, grepMax)
	if expr == "" {
		return nil, errors.New("the pattern is empty: give a regular expression")
	}
	if fold {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("the pattern is not a valid regular expression (Go RE2 syntax): %v", err)
	}
	filter = strings.TrimPrefix(filter, "./")
	if filter != "" && !doublestar.ValidatePattern(filter) {
		return nil, fmt.Errorf("the glob %q is not a valid pattern", filter)
	}
	w := t.w.in(ctx)
	start, info, err := w.dirName(p)
	if err != nil {
		return nil, err
	}

	var out []string
	more := false
	search := func(name string) error {
		if filter != "" {
			subject := name
			if !strings.Contains(filter, "/") {
				subject = path.Base(name)
			}
			if !doublestar.MatchUnvalidated(filter, subject) {
				return nil
			}
		}
		f, err := w.root.FS().Open(name)
		if err != nil {
			return nil
		}
		defer f.Close()
		if info, err := f.Stat(); err != nil || w.checkLinks(name, info) != nil {
			return nil // skipped, like a binary file
		}
		br := bufio.NewReaderSize(f, 64<<10)
		sample, _ := br.Peek(sniffBytes)
		if looksBinary(sample, len(sample) < sniffBytes) {
			return nil
		}
		for n := 1; ; n++ {
			line, _, err := readLine(br, 64<<10)
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return nil
			}
			if !re.Match(line) {
				continue
			}
			if len(out) == most {
				more = true
				return fs.SkipAll
			}
			text := strings.ToValidUTF8(strings.TrimSuffix(string(line), "\r"), "\uFFFD")
			if utf8.RuneCountInString(text) > grepLineChars {
				text = text[:runeOffset(text, grepLineChars)] + " …"
			}
			out = append(out, fmt.Sprintf("%s:%d: %s", w.show(name), n, text))
		}
	}
	if info.Mode().IsRegular() {
		err = search(start)
	} else {
		err = w.walk(ctx, start, func(name string, d fs.DirEntry) error {
			if !d.Type().IsRegular() {
				return nil
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			return search(name)
		})
	}
	if err != nil && !errors.Is(err, fs.SkipAll) {
		return nil, w.pathError(p, err)
	}
	if len(out) == 0 {
		return fmt.Sprintf("No matches for %s in %s.", expr, w.show(start)), nil
	}
	if more {
		out = append(out, fmt.Sprintf("(Showing the first %d matching lines; there are more: narrow the pattern, the path or the glob.)", most))
	}
	return strings.Join(out, "\n"), nil
}
