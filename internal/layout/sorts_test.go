package layout

import (
	"go/ast"
	"testing"
)

// TestNoSortInstantiatedPerStruct: nb sorts and searches slices of its
// own struct types with sort.Slice and sort.SliceStable, not with
// slices.SortFunc, SortStableFunc or BinarySearchFunc. Each element type
// those generic functions are called with links its own copy of pdqsort
// (or of the stable sort), 12-18 KB of code each with their tables,
// while sort.Slice's one copy serves every type; the order is the same,
// the algorithm being the same (bench/README.md, "Binary: sorts, metrics
// and the rest"). Elements of a basic type, pointers and fs.DirEntry
// (which os.ReadDir instantiates anyway) share a copy and are allowed.
func TestNoSortInstantiatedPerStruct(t *testing.T) {
	generic := map[string]bool{"SortFunc": true, "SortStableFunc": true, "BinarySearchFunc": true}
	basic := map[string]bool{"string": true, "int": true, "int64": true, "int32": true, "uint64": true, "uint32": true, "float64": true, "byte": true, "rune": true}
	goFiles(t, ".", func(path string, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !generic[sel.Sel.Name] {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "slices" {
				return true
			}
			lit, ok := call.Args[len(call.Args)-1].(*ast.FuncLit)
			if !ok || len(lit.Type.Params.List) == 0 {
				t.Errorf("%s: slices.%s with a function that is not a literal: check its element type by hand and allow it here", path, sel.Sel.Name)
				return true
			}
			switch typ := lit.Type.Params.List[0].Type.(type) {
			case *ast.Ident:
				if basic[typ.Name] {
					return true
				}
			case *ast.StarExpr:
				return true
			case *ast.SelectorExpr:
				if x, ok := typ.X.(*ast.Ident); ok && x.Name == "fs" && typ.Sel.Name == "DirEntry" {
					return true
				}
			}
			t.Errorf("%s: slices.%s over a slice of %s: use sort.Slice or sort.SliceStable (one shared copy of the sort)", path, sel.Sel.Name, typeString(lit.Type.Params.List[0].Type))
			return true
		})
	})
}

// typeString is a short form of a parameter's type for the messages.
func typeString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return typeString(e.X) + "." + e.Sel.Name
	case *ast.ArrayType:
		return "[]" + typeString(e.Elt)
	}
	return "a composite type"
}
