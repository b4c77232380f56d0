package guard

import (
	"errors"
	"strings"
	"testing"
)

// TestCheckNestingAccepts: ordinary code, long flat expressions and long
// files pass.
func TestCheckNestingAccepts(t *testing.T) {
	for name, src := range map[string]string{
		"program": `local M = {}
function M.format(items, opts)
  opts = opts or {}
  local out = {}
  for i, item in ipairs(items) do
    if type(item) == "table" and item.name then
      out[#out + 1] = ("%d. %s"):format(i, item.name:upper()) .. (opts.suffix or "")
    elseif item ~= nil then
      out[#out + 1] = tostring(item)
    else
      repeat local x = i until true
    end
  end
  return table.concat(out, "\n"), #out
end
return M.format({{name = "a"}, "b"}, {suffix = "!"})`,
		"flat sums":            "return 1" + strings.Repeat(" + x * 2 - y", 2000),
		"flat alternatives":    "return x == 1" + strings.Repeat(" or x == 1 and y ~= 2", 2000),
		"many statements":      strings.Repeat("print(a.b.c) x = y.z(1)(2) f 'x' g {1} ", 2000),
		"many calls":           strings.Repeat("s = s:upper():lower():rep(2) ", 2000),
		"long table":           "return {" + strings.Repeat("{1, {2}, x = 'y'}, ", 5000) + "}",
		"deep but allowed":     "return " + strings.Repeat("(", 150) + "1" + strings.Repeat(")", 150),
		"strings and comments": "local s = [[ ((((((( ]] -- ((((((((((((\n" + `return "((((((((" .. '{{{{{{'`,
		"unfinished":           "return ((((",
	} {
		if err := CheckNesting([]byte(src), MaxSyntaxDepth); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestCheckNestingRefuses: every construct golua nests, past the limit,
// with the line where the limit was passed.
func TestCheckNestingRefuses(t *testing.T) {
	n := MaxSyntaxDepth + 1
	for name, src := range map[string]string{
		"parentheses":                "return " + strings.Repeat("(", n) + "1" + strings.Repeat(")", n),
		"tables":                     "return " + strings.Repeat("{", n) + strings.Repeat("}", n),
		"indexes":                    "return " + strings.Repeat("a[", n) + "1" + strings.Repeat("]", n),
		"functions":                  strings.Repeat("return function() ", n) + strings.Repeat("end ", n),
		"blocks":                     strings.Repeat("do ", n) + strings.Repeat("end ", n),
		"ifs":                        strings.Repeat("if x then ", n) + strings.Repeat("end ", n),
		"whiles":                     strings.Repeat("while x do ", n) + strings.Repeat("end ", n),
		"repeats":                    strings.Repeat("repeat ", n) + strings.Repeat("until x ", n),
		"not":                        "return " + strings.Repeat("not ", n) + "x",
		"minus":                      "return " + strings.Repeat("- ", n) + "x",
		"length":                     "return " + strings.Repeat("#", n) + "x",
		"concatenations":             "return a" + strings.Repeat(" .. a", n),
		"concatenations across sums": "return a" + strings.Repeat(" .. a + 1", n),
		"powers":                     "return 2" + strings.Repeat("^2", n),
		"fields":                     "return a" + strings.Repeat(".b", n),
		"methods":                    "return s" + strings.Repeat(":m()", n),
		"calls":                      "return f" + strings.Repeat("()", n),
		"string calls":               "return f" + strings.Repeat(" 'x'", n),
		"arguments":                  "return " + strings.Repeat("f(", n) + strings.Repeat(")", n),
		"mixed":                      "return " + strings.Repeat("f({-(", n/3+1) + strings.Repeat(")})", n/3+1),
	} {
		src = "local x = 1\n" + src
		err := CheckNesting([]byte(src), MaxSyntaxDepth)
		var ne *NestingError
		if !errors.As(err, &ne) {
			t.Errorf("%s: %v, want a NestingError", name, err)
			continue
		}
		if ne.Line != 2 || ne.Limit != MaxSyntaxDepth {
			t.Errorf("%s: line %d, limit %d", name, ne.Line, ne.Limit)
		}
	}
}
