package layout

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/nbots/nb"

// imports maps each package folder below root (slash-separated, relative)
// to the module packages its non-test files import.
func imports(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		for _, spec := range f.Imports {
			p, _ := strconv.Unquote(spec.Path.Value)
			if strings.HasPrefix(p, module+"/") {
				out[rel] = append(out[rel], strings.TrimPrefix(p, module+"/"))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func under(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

// TestFrontEndsDoNotImportEachOther: the gateway, the MCP server and the
// robopages API take what they share with nb serve (tokens, the browser
// guard, readiness, listen rules) from internal/httpguard, never from
// package server, so no front-end depends on another.
func TestFrontEndsDoNotImportEachOther(t *testing.T) {
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the module root is not at %s: %v", root, err)
	}
	all := imports(t, root)
	// The walk must see the packages it judges: the web chat takes its
	// guard from httpguard.
	found := false
	for _, d := range all["gateway/web"] {
		found = found || d == "internal/httpguard"
	}
	if !found {
		t.Fatalf("gateway/web's imports were not read: %v", all["gateway/web"])
	}
	for pkg, deps := range all {
		if !under(pkg, "gateway") && !under(pkg, "mcp") && !under(pkg, "robopage") {
			continue
		}
		for _, d := range deps {
			if under(d, "server") {
				t.Errorf("%s imports %s: take the shared part from internal/httpguard (or move it there)", pkg, d)
			}
		}
	}
}
