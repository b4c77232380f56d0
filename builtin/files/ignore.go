package files

import (
	"bufio"
	"io/fs"
	"path"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// ignore holds the .gitignore rules that apply during a walk of the
// workspace, as git reads them (gitignore(5)): each folder's .gitignore
// applies below that folder, later rules win over earlier ones, deeper
// files over shallower ones, "!" re-includes, a trailing "/" matches
// folders only, a pattern with a "/" before its end is anchored to its
// file's folder, others match a name at any depth. The glob syntax itself
// ("*", "?", "[...]", "**") is doublestar's, which is git's.
type ignore struct {
	rules []ignoreRule
}

type ignoreRule struct {
	base     string // folder of the .gitignore, "." for the workspace
	pattern  string // doublestar pattern
	anchored bool
	dirOnly  bool
	negate   bool
}

// alwaysSkipped are folders no search looks into.
var alwaysSkipped = map[string]bool{".git": true}

// load reads dir/.gitignore, if there is one, from fsys.
func (ig *ignore) load(fsys fs.FS, dir string) {
	f, err := fsys.Open(path.Join(dir, ".gitignore"))
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if r, ok := parseIgnoreLine(sc.Text(), dir); ok {
			ig.rules = append(ig.rules, r)
		}
	}
}

// loadParents reads the .gitignore files of the folders from the
// workspace down to dir (not dir's own: the walk reads that).
func (ig *ignore) loadParents(fsys fs.FS, dir string) {
	if dir == "." {
		return
	}
	ig.load(fsys, ".")
	parts := strings.Split(dir, "/")
	for i := 1; i < len(parts); i++ {
		ig.load(fsys, strings.Join(parts[:i], "/"))
	}
}

func parseIgnoreLine(line, base string) (ignoreRule, bool) {
	// Trailing spaces are dropped unless escaped with a backslash.
	for strings.HasSuffix(line, " ") && !strings.HasSuffix(line, `\ `) {
		line = line[:len(line)-1]
	}
	if line == "" || strings.HasPrefix(line, "#") {
		return ignoreRule{}, false
	}
	r := ignoreRule{base: base}
	switch {
	case strings.HasPrefix(line, "!"):
		r.negate = true
		line = line[1:]
	case strings.HasPrefix(line, `\!`), strings.HasPrefix(line, `\#`):
		line = line[1:]
	}
	if strings.HasSuffix(line, "/") {
		r.dirOnly = true
		line = strings.TrimRight(line, "/")
	}
	if line == "" {
		return ignoreRule{}, false
	}
	if strings.Contains(line, "/") {
		r.anchored = true
		line = strings.TrimPrefix(line, "/")
	}
	// Braces are literal in gitignore, alternatives in doublestar.
	line = strings.NewReplacer("{", `\{`, "}", `\}`).Replace(line)
	if !doublestar.ValidatePattern(line) {
		return ignoreRule{}, false
	}
	r.pattern = line
	return r, true
}

// ignored reports whether the file or folder at name (relative to the
// workspace, slash-separated) is ignored. The last matching rule decides.
func (ig *ignore) ignored(name string, isDir bool) bool {
	if isDir && alwaysSkipped[path.Base(name)] {
		return true
	}
	result := false
	for _, r := range ig.rules {
		if r.dirOnly && !isDir {
			continue
		}
		rel := name
		if r.base != "." {
			if !strings.HasPrefix(name, r.base+"/") {
				continue
			}
			rel = name[len(r.base)+1:]
		}
		var match bool
		if r.anchored {
			match = doublestar.MatchUnvalidated(r.pattern, rel)
			// "dir/**" matches what is inside dir, not dir itself.
			if match && strings.HasSuffix(r.pattern, "/**") && rel == strings.TrimSuffix(r.pattern, "/**") {
				match = false
			}
		} else {
			match = doublestar.MatchUnvalidated(r.pattern, path.Base(rel))
		}
		if match {
			result = !r.negate
		}
	}
	return result
}
