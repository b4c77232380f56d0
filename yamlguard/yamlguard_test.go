package yamlguard

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func deepFlow(n int) []byte {
	return []byte("misc: " + strings.Repeat("[", n) + strings.Repeat("]", n) + "\n")
}

// TestRefused: each text is refused at the line and column where it
// crosses a limit, quickly and without building anything.
func TestRefused(t *testing.T) {
	var block strings.Builder
	for i := range 150 {
		block.WriteString(strings.Repeat(" ", i) + "a:\n")
	}
	for _, tt := range []struct {
		name      string
		src       []byte
		line, col int
		msg       string
	}{
		{"100,000 [", deepFlow(100000), 1, 6 + 100, "nests deeper than 100 levels"},
		{"1,000,000 [ without a size limit", deepFlow(1000000), 1, 6 + 100, "nests deeper than 100 levels"},
		{"{ and [", []byte("a: " + strings.Repeat("{b: [", 60)), 1, 4 + 5*49 + 4, "nests deeper than 100 levels"},
		{"indentation", []byte(block.String()), 101, 101, "nests deeper than 100 levels"},
		{"dashes", []byte(strings.Repeat("- ", 300) + "a\n"), 1, 199, "nests deeper than 100 levels"},
		{"keys on one line", []byte("0: " + strings.Repeat("&0 <<: ", 200) + "\n"), 1, 4 + 7*99 + 5, "nests deeper than 100 levels"},
		// go-yaml nests a key under an empty "-" at its column, and an
		// entry under an empty key: 6,600 of these took 1.5 s and 343 MB.
		{"empty entries and keys", []byte(strings.Repeat("-\n0:\n", 6600)), 101, 1, "nests deeper than 100 levels"},
		{"empty entries and keys, CR", []byte(strings.Repeat("-\r0:\r", 6600)), 101, 1, "nests deeper than 100 levels"},
		{"deep after a document start", []byte("---\na: 1\n--- " + strings.Repeat("[", 200)), 3, 5 + 100, "nests deeper"},
		{"tokens", []byte("a: [" + strings.Repeat("1,", 30000) + "]\n"), 1, 4 + 2*9999 + 1, "more than 20000 YAML tokens"},
		{"comments", []byte(strings.Repeat("# a comment\n", 30000)), 20001, 1, "more than 20000 YAML tokens"},
	} {
		lim := Default
		if strings.Contains(tt.name, "without a size limit") {
			lim.MaxBytes = 0
		}
		start := time.Now()
		_, err := Check(tt.src, lim)
		elapsed := time.Since(start)
		e, ok := err.(*Error)
		if !ok {
			t.Errorf("%s: accepted (%v)", tt.name, err)
			continue
		}
		if e.Line != tt.line || e.Column != tt.col || !strings.Contains(e.Msg, tt.msg) {
			t.Errorf("%s: %v, want %d:%d: …%s…", tt.name, e, tt.line, tt.col, tt.msg)
		}
		if elapsed > 100*time.Millisecond {
			t.Errorf("%s: took %v", tt.name, elapsed)
		}
	}
}

func TestTooLarge(t *testing.T) {
	src := []byte(strings.Repeat("# padding\n", 60000))
	_, err := Check(src, Default)
	e, ok := err.(*Error)
	if !ok || e.Line != 52429 || !strings.Contains(e.Msg, "larger than 512 KiB") {
		t.Fatalf("got %v", err)
	}
}

// TestAllocations: refusing the deepest text allocates only the stack of
// indentation levels, whatever the text's size.
func TestAllocations(t *testing.T) {
	for _, src := range [][]byte{deepFlow(1000000), []byte(strings.Repeat("- ", 1000000))} {
		allocs := testing.AllocsPerRun(5, func() {
			if _, err := Check(src, Limits{MaxDepth: 100}); err == nil {
				t.Fatal("accepted")
			}
		})
		if allocs > 12 {
			t.Errorf("%.0f allocations", allocs)
		}
	}
}

// TestNotCounted: brackets and indentation inside text are not nesting.
func TestNotCounted(t *testing.T) {
	deep := strings.Repeat("[{", 200)
	for _, src := range []string{
		"a: \"" + deep + "\"\n",
		"a: '" + deep + "'\n",
		"a: 'it''s " + deep + "'\n",
		"a: \"\\\"" + deep + "\"\n",
		"a: \"first line\n  " + deep + "\n  \"\n",
		"# " + deep + "\na: 1 # " + deep + "\n",
		"a: |\n  " + deep + "\n  x\n\n  " + deep + "\nb: 1\n",
		"a: >-\n    " + deep + "\nb: 1\n",
		"- |2\n   " + deep + "\n",
		"a: x" + deep + "\n",
		"a: plain text\n  that goes on " + deep + "\n",
		"a: plain\n  - " + deep + "\n",
		"a: [\"" + strings.Repeat("]", 200) + "\", '" + strings.Repeat("}", 50) + "']\nb: " + deep + "\n",
		"a: {b: \"c]\", d: e}\nf: x\n",
		"lua: |\n" + strings.Repeat("  if x then\n    t = {{{{{\n", 100) + "\n",
	} {
		if strings.HasSuffix(src, "b: "+deep+"\n") {
			// The last key is deep on purpose: everything before it was text.
			st, err := Check([]byte(src), Limits{})
			if err != nil || st.Flow != 400 {
				t.Errorf("%.60q: flow %d, want only the last key's 400 (%v)", src, st.Flow, err)
			}
			continue
		}
		if st, err := Check([]byte(src), Default); err != nil || st.Depth > 3 {
			t.Errorf("%.60q: depth %d, %v", src, st.Depth, err)
		}
	}
}

// TestCorpus: every real cartridge and robopage is far inside the limits.
func TestCorpus(t *testing.T) {
	root := "../../shared/corpus"
	if _, err := os.Stat(root); err != nil {
		t.Skipf("SKIPPING: the shared corpus is not at %s", root)
	}
	var files int
	var most Stats
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if ext := filepath.Ext(path); ext != ".yml" && ext != ".yaml" {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		st, err := Check(src, Default)
		if err != nil {
			t.Errorf("%s: %v", path, err)
		}
		most.Depth, most.Flow, most.Tokens = max(most.Depth, st.Depth), max(most.Flow, st.Flow), max(most.Tokens, st.Tokens)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 150 {
		t.Errorf("only %d files", files)
	}
	t.Logf("%d files; deepest %d (flow %d), most tokens %d", files, most.Depth, most.Flow, most.Tokens)
}

// BenchmarkCheck measures the scan of a large ordinary cartridge.
func BenchmarkCheck(b *testing.B) {
	src, err := os.ReadFile("../../shared/corpus/cartridges/gbaptista__ion/static/cartridges/default.yml")
	if err != nil {
		b.Skip(err)
	}
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		if _, err := Check(src, Default); err != nil {
			b.Fatal(err)
		}
	}
}
