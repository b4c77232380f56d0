package robopage

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/nbots/nb/proc"
)

// Library is a set of loaded pages, the reference's "book".
type Library struct {
	// Root is the canonical path the pages were loaded from (a folder, or
	// a single page file).
	Root string
	// Pages are sorted by canonical path.
	Pages []*Page
	// Problems are the pages and functions skipped while loading, and
	// renamed functions; sorted by file and line.
	Problems []Problem

	byName map[string]*Function
}

// DefaultPath is where pages live when no path is given: ROBOPAGES_PATH
// of environ (nb's environment, NAME=value), else ~/.robopages.
func DefaultPath(environ []string) string {
	if p, _ := proc.Lookup(environ, "ROBOPAGES_PATH"); p != "" {
		return p
	}
	return "~/.robopages"
}

// ExpandPath expands a leading ~ (HOME) and $VAR or ${VAR} references
// with the variables of environ (NAME=value); an unset variable is empty.
func ExpandPath(path string, environ []string) string {
	path = os.Expand(path, func(name string) string {
		v, _ := proc.Lookup(environ, name)
		return v
	})
	if path == "~" || strings.HasPrefix(path, "~/") {
		if home, ok := proc.Lookup(environ, "HOME"); ok && home != "" {
			path = home + path[1:]
		}
	}
	return path
}

// ErrNoPages is the error of Load when the path does not exist; callers
// add what the user can do where the path came from.
var ErrNoPages = errors.New("does not exist")

// Load reads the pages at path (used as given: expand it with ExpandPath
// first): a single page, or every *.yml file below a folder, skipping folders and files whose name starts with a dot below
// the root. `${cwd}` is replaced by the page's folder before parsing. A
// page is kept only when its canonical path contains filter (when not
// empty). The name of a page defaults to its file stem and its categories
// to the folders below the root.
//
// Unlike the reference, a broken page does not fail the load: it is left
// out and reported in Library.Problems. Load fails only when the path
// cannot be read or holds no page at all.
//
// Function names are global: a name already used by an earlier page (in
// path order) is renamed <page name>_<function>, with a warning.
func Load(path, filter string) (*Library, error) {
	expanded := path
	abs, err := filepath.Abs(expanded)
	if err != nil {
		return nil, fmt.Errorf("robopages path %s: %w", path, err)
	}
	root, err := filepath.EvalSymlinks(abs)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fmt.Errorf("robopages path %s %w", path, ErrNoPages)
		}
		return nil, fmt.Errorf("robopages path %s: %w", path, err)
	}
	info, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("robopages path %s: %w", path, err)
	}
	var files []string
	if !info.IsDir() {
		files = []string{root}
	} else {
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if p == root {
					return err
				}
				// An unreadable folder is skipped like a broken page.
				return nil
			}
			if p != root && strings.HasPrefix(d.Name(), ".") {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.Type().IsRegular() || d.Type()&fs.ModeSymlink != 0 {
				if strings.HasSuffix(d.Name(), ".yml") {
					files = append(files, p)
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("robopages path %s: %w", path, err)
		}
	}
	lib := &Library{Root: root, byName: map[string]*Function{}}
	// Problems name the file as the user wrote the path.
	display := func(canon string) string {
		if !info.IsDir() {
			return expanded
		}
		rel, err := filepath.Rel(root, canon)
		if err != nil {
			return canon
		}
		return filepath.Join(expanded, rel)
	}
	type found struct{ canon, found string }
	var pages []found
	for _, f := range files {
		canon, err := filepath.EvalSymlinks(f)
		if err != nil {
			lib.Problems = append(lib.Problems, Problem{File: display(f), Severity: Error, Message: fmt.Sprintf("cannot read the page: %v", err)})
			continue
		}
		if st, err := os.Stat(canon); err != nil || st.IsDir() {
			continue
		}
		if filter != "" && !strings.Contains(canon, filter) {
			continue
		}
		pages = append(pages, found{canon, f})
	}
	sort.Slice(pages, func(i, j int) bool { return pages[i].canon < pages[j].canon })
	total := 0
	for _, pf := range pages {
		total++
		name := display(pf.found)
		data, err := os.ReadFile(pf.canon)
		if err != nil {
			lib.Problems = append(lib.Problems, Problem{File: name, Severity: Error, Message: fmt.Sprintf("cannot read the page: %v", err)})
			continue
		}
		page, ps := Parse(data, name, filepath.Dir(pf.canon))
		lib.Problems = append(lib.Problems, ps...)
		if page == nil {
			continue
		}
		page.Path = pf.canon
		page.File = name
		rel := filepath.Base(pf.canon)
		if info.IsDir() {
			if r, err := filepath.Rel(root, pf.found); err == nil {
				rel = r
			}
		}
		page.Rel = filepath.ToSlash(rel)
		if page.Name == "" {
			page.Name = stem(pf.canon)
		}
		if len(page.Categories) == 0 && info.IsDir() {
			page.Categories = categoriesFromPath(rel)
		}
		lib.add(page, name)
	}
	sortProblems(lib.Problems)
	if total == 0 {
		return nil, fmt.Errorf("no pages found in %s", path)
	}
	return lib, nil
}

// add registers a page's functions under unique names.
func (l *Library) add(page *Page, file string) {
	kept := page.Functions[:0]
	for _, fn := range page.Functions {
		if _, taken := l.byName[fn.Name]; taken {
			first := l.byName[fn.Name].Page.Rel
			renamed := page.Name + "_" + fn.Name
			if _, again := l.byName[renamed]; again {
				l.Problems = append(l.Problems, Problem{File: file, Line: fn.Line, Function: fn.Key, Severity: Error,
					Message: fmt.Sprintf("function name %s is not unique: %s already has it and %s is taken too; rename the function", fn.Name, first, renamed)})
				continue
			}
			l.Problems = append(l.Problems, Problem{File: file, Line: fn.Line, Function: fn.Key, Severity: Warning,
				Message: fmt.Sprintf("function name %s is already used by %s: served as %s", fn.Name, first, renamed)})
			fn.Name = renamed
		}
		l.byName[fn.Name] = fn
		kept = append(kept, fn)
	}
	page.Functions = kept
	l.Pages = append(l.Pages, page)
}

// Function returns the function served under name.
func (l *Library) Function(name string) (*Function, bool) {
	f, ok := l.byName[name]
	return f, ok
}

// Functions lists every function in page order.
func (l *Library) Functions() []*Function {
	var out []*Function
	for _, p := range l.Pages {
		out = append(out, p.Functions...)
	}
	return out
}

// Filter returns the pages whose canonical path contains filter, as the
// server's GET /{filter} does; all pages when filter is empty.
func (l *Library) Filter(filter string) []*Page {
	if filter == "" {
		return l.Pages
	}
	var out []*Page
	for _, p := range l.Pages {
		if strings.Contains(p.Path, filter) {
			out = append(out, p)
		}
	}
	return out
}

// NewLibrary builds a library from pages already parsed, as Load does
// after reading them (tests and programs that embed pages).
func NewLibrary(root string, pages ...*Page) *Library {
	l := &Library{Root: root, byName: map[string]*Function{}}
	for _, p := range pages {
		for _, fn := range p.Functions {
			fn.Page = p
		}
		l.add(p, p.Path)
	}
	return l
}
