package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/nbots/nb"

// imports maps each package folder of the module (slash-separated,
// relative) to the module packages its non-test files import.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	goFiles(t, ".", func(path string, f *ast.File) {
		pkg := filepath.ToSlash(filepath.Dir(path))
		for _, spec := range f.Imports {
			p, _ := strconv.Unquote(spec.Path.Value)
			if strings.HasPrefix(p, module+"/") {
				out[pkg] = append(out[pkg], strings.TrimPrefix(p, module+"/"))
			}
		}
	})
	return out
}

func under(pkg, dir string) bool { return pkg == dir || strings.HasPrefix(pkg, dir+"/") }

// TestFrontEndsDoNotImportEachOther: the gateway, the MCP server and the
// robopages API take what they share with nb serve (tokens, the browser
// guard, readiness, listen rules) from internal/httpguard, never from
// package server, so no front-end depends on another.
func TestFrontEndsDoNotImportEachOther(t *testing.T) {
	if _, err := os.Stat(filepath.Join("..", "..", "go.mod")); err != nil {
		t.Fatalf("the module root is not two folders up: %v", err)
	}
	all := imports(t)
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

// goFiles parses the non-test Go files below dir (relative to the module
// root) and gives each to fn with its slash-separated path. Hidden
// folders, testdata and node_modules (npm packages ship Go files too)
// are not the module's.
func goFiles(t *testing.T, dir string, fn func(path string, f *ast.File)) {
	t.Helper()
	root := filepath.Join("..", "..", dir)
	n := 0
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
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		n++
		rel, _ := filepath.Rel(filepath.Join("..", ".."), path)
		fn(filepath.ToSlash(rel), f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatalf("no Go file was read under %s", root)
	}
}

// TestCommandHasNoInit: cmd/nb wires what it runs explicitly (the
// gateway's features in one order, its channels from gateway/channels),
// never through registries that init functions fill in file-name order.
func TestCommandHasNoInit(t *testing.T) {
	goFiles(t, "cmd/nb", func(path string, f *ast.File) {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == "init" {
				t.Errorf("%s has a func init: wire it explicitly where it is used", path)
			}
		}
	})
}

// TestGatewayLeavesTheProcessAlone: the gateway is a library; the
// process's environment, signals, memory limit, exit and standard error
// are cmd/nb's, which turns them into the gateway's options.
func TestGatewayLeavesTheProcessAlone(t *testing.T) {
	banned := map[string]bool{
		"os.Getenv": true, "os.LookupEnv": true, "os.Environ": true, "signal.Notify": true, "signal.NotifyContext": true,
		"debug.SetMemoryLimit": true, "os.Exit": true, "os.Stderr": true,
	}
	goFiles(t, "gateway", func(path string, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && banned[x.Name+"."+sel.Sel.Name] {
				t.Errorf("%s uses %s.%s: take it as an option that cmd/nb fills", path, x.Name, sel.Sel.Name)
			}
			return true
		})
	})
}

// TestGatewayHasNoNilSeams: the replica and steering seams are null
// objects, never nil: a gateway alone runs with replica.Local and
// gateway.LocalSteering (gateway.Alone, gateway/gatewayrun), so no code
// under gateway/ branches on Steer, Elector, Claims, Counters, Others or
// Delivered being nil; nor does the budgets' ledger on its Shared
// counters (it counts through an object, alone or shared), nor the
// access checker on its Pairings (a file alone, a bus's store shared).
func TestGatewayHasNoNilSeams(t *testing.T) {
	common := map[string]bool{"Steer": true, "Elector": true, "Claims": true, "Counters": true, "Others": true, "Delivered": true}
	// Seams of one package, judged in its own code.
	own := map[string]map[string]bool{
		filepath.Join("gateway", "budget"): {"Shared": true},
		filepath.Join("gateway", "access"): {"Pairings": true, "Shared": true},
	}
	all := map[string]bool{}
	for k := range common {
		all[k] = true
	}
	for dir, names := range own {
		for k := range names {
			all[k] = true
		}
		for k := range common {
			names[k] = true
		}
		own[dir] = names
	}
	used := map[string]bool{}
	goFiles(t, "gateway", func(path string, f *ast.File) {
		if strings.HasSuffix(filepath.Dir(path), "test") {
			return // a test kit (replicatest) checks implementations, nil ones included
		}
		seams := common
		for dir, names := range own {
			if under(path, dir) && !strings.HasSuffix(path, "_test.go") {
				seams = names
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && seams[sel.Sel.Name] {
				used[sel.Sel.Name] = true
			}
			be, ok := n.(*ast.BinaryExpr)
			if !ok || (be.Op != token.EQL && be.Op != token.NEQ) {
				return true
			}
			for _, pair := range [][2]ast.Expr{{be.X, be.Y}, {be.Y, be.X}} {
				sel, ok := pair[0].(*ast.SelectorExpr)
				if id, isNil := pair[1].(*ast.Ident); ok && isNil && id.Name == "nil" && seams[sel.Sel.Name] {
					t.Errorf("%s compares %s with nil: give the single-gateway case a null object (replica.Local, gateway.LocalSteering)", path, sel.Sel.Name)
				}
			}
			return true
		})
	})
	// The walk must see the seams it judges: a seam renamed away would
	// leave this test checking nothing.
	for name := range all {
		if !used[name] {
			t.Errorf("no code under gateway/ uses a seam named %s: rename it here", name)
		}
	}
}

// flagName matches a command-line flag (--listen) inside a message.
var flagName = regexp.MustCompile(`(^|[\s(])--[a-z]`)

// TestLibraryErrorsNameNoFlag: a library does not know the flags of the
// command that runs it, so its errors (errors.New, fmt.Errorf) are typed
// or neutral, and cmd/nb words the advice per command.
func TestLibraryErrorsNameNoFlag(t *testing.T) {
	goFiles(t, ".", func(path string, f *ast.File) {
		if under(path, "cmd") || f.Name.Name == "main" {
			return
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, ok := sel.X.(*ast.Ident)
			if !ok || !(pkg.Name == "errors" && sel.Sel.Name == "New" || pkg.Name == "fmt" && sel.Sel.Name == "Errorf") {
				return true
			}
			for _, a := range call.Args {
				ast.Inspect(a, func(n ast.Node) bool {
					lit, ok := n.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						return true
					}
					if s, err := strconv.Unquote(lit.Value); err == nil && flagName.MatchString(s) {
						t.Errorf("%s: %s.%s(%s) names a flag: return a typed error (or neutral text) and let cmd/nb word the advice", path, pkg.Name, sel.Sel.Name, lit.Value)
					}
					return true
				})
			}
			return true
		})
	})
}
