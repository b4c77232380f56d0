package fennel

import (
	"regexp"
	"testing"
)

var fileLineCol = regexp.MustCompile(`^testdata/programs/[^:]+\.fnl:\d+:\d+: Compile error: .+`)

// TestDifferential runs every program of testdata/programs through this
// compiler on golua and through the reference fennel.lua on lua5.4, and
// compares what they print.
func TestDifferential(t *testing.T) {
	progs := loadPrograms(t)
	if len(progs) < 300 {
		t.Errorf("only %d differential programs; want at least 300", len(progs))
	}
	bin, dir := skipWithoutReference(t)
	ref := runReference(t, bin, dir, progs)
	for _, p := range progs {
		t.Run(p.name, func(t *testing.T) {
			want, ok := ref[p.name]
			if !ok {
				t.Fatalf("reference gave no result")
			}
			got := runOurs(t, p)
			if p.wantErr {
				if !want.failed {
					t.Errorf("reference did not fail; the program is not an error case (output %q)", want.out)
				}
				if !got.failed {
					t.Errorf("we did not fail; reference failed with %s", want.err)
				}
			} else if want.failed {
				t.Fatalf("reference failed: %s", want.err)
			}
			if got.failed && !want.failed {
				t.Errorf("we failed: %s", got.err)
			}
			if got.out != want.out {
				t.Errorf("output differs\n--- ours\n%s\n--- reference\n%s", got.out, want.out)
			}
		})
	}
}

// TestCompileErrorsLocated checks that programs the reference refuses at
// compile time are refused by us too, with file:line:col.
func TestCompileErrorsLocated(t *testing.T) {
	for _, p := range loadPrograms(t) {
		if !p.wantErr {
			continue
		}
		_, err := Compile(p.src, Options{Filename: p.file, Line: p.line})
		if err == nil {
			continue // a run-time error case
		}
		if !fileLineCol.MatchString(err.Error()) {
			t.Errorf("%s: error %q does not start with file:line:col", p.name, err)
		}
	}
}
