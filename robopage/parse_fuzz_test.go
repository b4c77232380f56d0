package robopage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse: no page makes the parser panic; a refused page has an error
// problem, every problem names the file, and an accepted page's functions
// have the names, schemas and command lines the rest of nb reads.
func FuzzParse(f *testing.F) {
	f.Add(page("echo"), "")
	f.Add("description: d\nfunctions:\n  f:\n    description: x\n    parameters:\n      a: {type: string, description: y, required: false, default: z, examples: [1]}\n    platforms:\n      linux: [ls, '${a}']\n    container:\n      image: alpine\n      args: [--net=host]\n", "/work")
	f.Add("functions: [a]\n", "")
	f.Add("description: ${cwd}\nfunctions: {}\n", "/dir with ${cwd}")
	f.Add("---\na: 1\n---\nb: 2\n", "")
	// 1 GB in the YAML parser at 10,000 levels before yamlguard.
	f.Add("description: deep\nfunctions:\n  f:\n    cmdline: "+strings.Repeat("[", 10000)+strings.Repeat("]", 10000)+"\n", "")
	if files, err := filepath.Glob("../../shared/corpus/robopages/*/*/*.yml"); err == nil {
		for _, name := range files[:min(len(files), 12)] {
			if src, err := os.ReadFile(name); err == nil {
				f.Add(string(src), "")
			}
		}
	}
	f.Fuzz(func(t *testing.T, src, dir string) {
		p, problems := Parse([]byte(src), "fuzz.yml", dir)
		if p == nil && !HasErrors(problems) {
			t.Fatalf("refused without an error: %v", problems)
		}
		for _, pr := range problems {
			if pr.File != "fuzz.yml" || pr.Message == "" {
				t.Fatalf("problem %+v", pr)
			}
		}
		if p == nil {
			return
		}
		for _, fn := range p.Functions {
			if fn.Name == "" {
				t.Fatalf("a function without a name: %+v", fn)
			}
			fn.Schema()
			for _, goos := range []string{"linux", "macos", "windows"} {
				fn.CommandLine(goos)
			}
		}
	})
}
