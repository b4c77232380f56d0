package script

import (
	"errors"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/nbots/nb/script/internal/guard"
)

// maxFuzzSize keeps fuzzing fast: golua compiles a 64 KiB source in up to
// a second, and nesting past the limit takes a few hundred bytes.
const maxFuzzSize = 4 << 10

// FuzzLuaCompile checks that compiling Lua as nb does (the nesting
// check, then golua's compiler) never panics and never recurses deeply:
// the fuzzing process's Go stack is limited to 64 MiB (a program that
// golua parses ten thousand levels deep fits in that), so code that the
// nesting check lets through and that golua cannot handle shows as a
// crash.
func FuzzLuaCompile(f *testing.F) {
	for _, c := range crashCases {
		if c.lang == Lua {
			src := c.source()
			if len(src) > maxFuzzSize {
				src = src[:maxFuzzSize]
			}
			f.Add(src)
		}
	}
	for _, s := range []string{
		"return 1", "return (", "return " + strings.Repeat("(", 199) + "1" + strings.Repeat(")", 199),
		"return " + strings.Repeat("not -#~", 50) + "x", "return a" + strings.Repeat("..a^b", 100),
		"local t = {" + strings.Repeat("{f()..g:h[1]}, ", 60) + "}", "::a:: goto a",
		"return function(...) return ... end", "local x <const> = 1 return x",
		"return [==[ ]] ]==] .. [[\n]]", "--[[ (((( ]] return 1", "return 0x1p4 + 1e-3 // 2",
		"if a then elseif b then else end while x do break end repeat until y for i = 1, 2 do end for k, v in pairs(t) do end",
	} {
		f.Add(s)
	}
	old := debug.SetMaxStack(64 << 20)
	f.Cleanup(func() { debug.SetMaxStack(old) })
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > maxFuzzSize {
			return
		}
		_, err := compileLua("fuzz.lua", src, guard.MaxSyntaxDepth)
		if err != nil && strings.Contains(err.Error(), "the Lua compiler failed") {
			// golua's compiler panicked; compileLua recovered it. Only
			// the known panic (too many constants) is expected.
			if !strings.Contains(err.Error(), "out of range") {
				t.Errorf("golua panicked: %v", err)
			}
		}
		var ne *guard.NestingError
		if errors.As(err, &ne) && ne.Line < 1 {
			t.Errorf("nesting error without a line: %v", err)
		}
	})
}
