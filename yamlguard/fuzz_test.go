package yamlguard

import (
	"strings"
	"testing"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/parser"
	"github.com/goccy/go-yaml/token"
)

// tokenFlowDepth is the deepest nesting of flow collections in go-yaml's
// own reading of src; 0 when go-yaml finds an invalid token, as its
// parser then refuses the text before it builds anything.
func tokenFlowDepth(src string) int {
	tokens := lexer.Tokenize(src)
	if tokens.InvalidToken() != nil {
		return 0
	}
	depth, max := 0, 0
	for _, tk := range tokens {
		switch tk.Type {
		case token.SequenceStartType, token.MappingStartType:
			depth++
			if depth > max {
				max = depth
			}
		case token.SequenceEndType, token.MappingEndType:
			if depth > 0 {
				depth--
			}
		}
	}
	return max
}

// astDepth is the deepest nesting of collections in a parsed node.
func astDepth(n ast.Node) int {
	switch v := n.(type) {
	case nil:
		return 0
	case *ast.DocumentNode:
		return astDepth(v.Body)
	case *ast.MappingNode:
		d := 0
		for _, mv := range v.Values {
			d = max(d, astDepth(mv.Key), astDepth(mv.Value))
		}
		return 1 + d
	case *ast.MappingValueNode:
		return 1 + max(astDepth(v.Key), astDepth(v.Value))
	case *ast.MappingKeyNode:
		return astDepth(v.Value)
	case *ast.SequenceNode:
		d := 0
		for _, item := range v.Values {
			d = max(d, astDepth(item))
		}
		return 1 + d
	case *ast.TagNode:
		return astDepth(v.Value)
	case *ast.AnchorNode:
		return astDepth(v.Value)
	}
	return 0
}

// FuzzCheck compares the guard with go-yaml itself: the guard never sees
// less nesting than the parser builds. A flow collection the guard does
// not count (taken for text inside a quote, a comment or a block scalar)
// is a way past it; so is block nesting it does not see. Check never
// panics and stops at its limits.
func FuzzCheck(f *testing.F) {
	for _, seed := range []string{
		"misc: " + strings.Repeat("[", 200) + strings.Repeat("]", 200) + "\n",
		"a: {b: [c, {d: e}]}\n",
		"a: \"[[[\"\nb: '{{'\nc: |\n  [[[[\n# [[[\nd: x [[[\n",
		"- - - - a\n- b\n",
		"a:\n  b:\n    c:\n      - d\n",
		"k: x\n  [\n- - - - - - a\n",
		"\t\tk: a\n  \"\n[[[[[[]]]]]]\"\n",
		"k: |\n  text\n\tmore\n[[[[\n",
		"!t key: |\n [[[[\n",
		"\"a\\x\"[[[\": b\n",
		"[a\n\"b]]]\"]\n",
		"{a: [b, \"c]\", 'd'']']}\n",
		"? [a]\n: [[b]]\n",
		"--- [[a]]\n--- {b: [c]}\n",
		"%YAML 1.2\n---\na: [b]\n",
		"&a [b, *a]\n",
		"k: >-\n  a\n  b\nl: [c]\n",
		// Found by this target: go-yaml ends a block scalar left of its
		// first line's indentation; a directive's name ends with its line.
		" >\n 0\n[0",
		"%0\n[",
		"-\r0:\r-\r0:",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, src string) {
		st, err := Check([]byte(src), Limits{})
		if err != nil {
			t.Fatalf("no limits, but %v", err)
		}
		if flow := tokenFlowDepth(src); flow > st.Flow {
			t.Fatalf("go-yaml opens %d flow collections, the guard counted %d", flow, st.Flow)
		}
		if file, err := parser.ParseBytes([]byte(src), 0); err == nil {
			for _, doc := range file.Docs {
				if d := astDepth(doc); d > 2*st.Depth+1 {
					t.Fatalf("go-yaml nests %d deep, the guard counted %d", d, st.Depth)
				}
			}
		}
		lim := Limits{MaxBytes: 1 << 20, MaxDepth: 3, MaxTokens: 40}
		st2, err := Check([]byte(src), lim)
		if err == nil && (st2.Depth > lim.MaxDepth || st2.Tokens > lim.MaxTokens) {
			t.Fatalf("accepted past the limits: %+v", st2)
		}
		if err != nil {
			e, ok := err.(*Error)
			if !ok || e.Line < 1 || e.Column < 1 {
				t.Fatalf("error without a position: %#v", err)
			}
		}
	})
}
