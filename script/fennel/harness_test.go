package fennel

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/arnodel/golua/lib/base"
	"github.com/arnodel/golua/lib/coroutine"
	"github.com/arnodel/golua/lib/mathlib"
	"github.com/arnodel/golua/lib/oslib"
	"github.com/arnodel/golua/lib/packagelib"
	"github.com/arnodel/golua/lib/stringlib"
	"github.com/arnodel/golua/lib/tablelib"
	"github.com/arnodel/golua/lib/utf8lib"
	rt "github.com/arnodel/golua/runtime"
	"github.com/nbots/nb/script/internal/lualib"
)

// program is one differential test program read from testdata/programs.
type program struct {
	name    string
	file    string // testdata file it comes from
	line    int    // line of its first source line in that file
	src     string
	wantErr bool // both compilers must fail (at compile or at run time)
}

// loadPrograms reads testdata/programs/*.fnl. Programs are separated by
// lines ";;;; name", or ";;;; name !error" for programs that must fail.
func loadPrograms(t testing.TB) []program {
	t.Helper()
	files, err := filepath.Glob("testdata/programs/*.fnl")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test programs: %v", err)
	}
	sort.Strings(files)
	var progs []program
	seen := map[string]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var cur *program
		var body []string
		flush := func() {
			if cur != nil {
				cur.src = strings.Join(body, "\n") + "\n"
				progs = append(progs, *cur)
			}
		}
		for i, line := range strings.Split(string(data), "\n") {
			if rest, ok := strings.CutPrefix(line, ";;;; "); ok {
				flush()
				name, flags, _ := strings.Cut(strings.TrimSpace(rest), " ")
				name = strings.TrimSuffix(filepath.Base(f), ".fnl") + "/" + name
				if seen[name] {
					t.Fatalf("%s:%d: duplicate program name %s", f, i+1, name)
				}
				seen[name] = true
				cur = &program{name: name, file: f, line: i + 2, wantErr: strings.Contains(flags, "!error")}
				body = nil
				continue
			}
			body = append(body, line)
		}
		flush()
	}
	return progs
}

// result is what running a program printed, and whether it failed.
type result struct {
	out    string
	failed bool
	err    string
}

// printLua replaces print in both runners, so output is formatted by the
// same code on golua and on lua5.4.
//
// golua v0.1.1 formats floats unlike Lua 5.4 (tostring(2^10) is "1024",
// not "1024.0"; 14 significant digits are not applied), so floats are
// formatted here the way Lua 5.4 does on both sides.
const printLua = `local out, tostring, select, concat, mtype, format = ...
local function str(v)
  if mtype(v) == "float" then
    if v ~= v then return "nan" end
    if v == 1/0 then return "inf" end
    if v == -1/0 then return "-inf" end
    local s = format("%.14g", v)
    if s:find("^-?%d+$") then s = s .. ".0" end
    return s
  end
  return tostring(v)
end
return function(...)
  local n = select("#", ...)
  local parts = {}
  for i = 1, n do parts[i] = str((select(i, ...))) end
  out[#out + 1] = concat(parts, "\t")
end`

// newLuaState makes a golua runtime like the one nb uses for cartridges:
// the safe standard libraries and the fennel runtime table.
func newLuaState(t testing.TB, stdout *bytes.Buffer) *rt.Runtime {
	t.Helper()
	r := rt.New(stdout)
	lualib.Load(r, packagelib.LibLoader, base.LibLoader, stringlib.LibLoader, tablelib.LibLoader, mathlib.LibLoader,
		utf8lib.LibLoader, coroutine.LibLoader, oslib.LibLoader)
	fnl, err := r.CompileAndLoadLuaChunk("fennel-runtime", []byte(RuntimeLua()), rt.TableValue(r.GlobalEnv()))
	if err != nil {
		t.Fatalf("runtime Lua does not load: %v", err)
	}
	v, err := rt.Call1(r.MainThread(), rt.FunctionValue(fnl))
	if err != nil {
		t.Fatalf("runtime Lua fails: %v", err)
	}
	r.SetEnv(r.GlobalEnv(), "fennel", v)
	return r
}

// runOurs compiles src with this package and runs it on golua.
func runOurs(t testing.TB, p program) result {
	lua, err := Compile(p.src, Options{Filename: p.file, Line: p.line})
	if err != nil {
		return result{failed: true, err: err.Error()}
	}
	var stdout bytes.Buffer
	r := newLuaState(t, &stdout)
	out := rt.NewTable()
	mk, err := r.CompileAndLoadLuaChunk("print", []byte(printLua), rt.TableValue(r.GlobalEnv()))
	if err != nil {
		t.Fatal(err)
	}
	env := r.GlobalEnv()
	pr, err := rt.Call1(r.MainThread(), rt.FunctionValue(mk), rt.TableValue(out),
		env.Get(rt.StringValue("tostring")), env.Get(rt.StringValue("select")),
		env.Get(rt.StringValue("table")).AsTable().Get(rt.StringValue("concat")),
		env.Get(rt.StringValue("math")).AsTable().Get(rt.StringValue("type")),
		env.Get(rt.StringValue("string")).AsTable().Get(rt.StringValue("format")))
	if err != nil {
		t.Fatal(err)
	}
	r.SetEnv(env, "print", pr)
	chunk, err := r.CompileAndLoadLuaChunk(p.name, []byte(lua), rt.TableValue(env))
	if err != nil {
		t.Fatalf("%s: compiled Lua does not load: %v\n%s", p.name, err, lua)
	}
	res := result{}
	if err := rt.Call(r.MainThread(), rt.FunctionValue(chunk), nil, rt.NewTerminationWith(nil, 0, true)); err != nil {
		res.failed, res.err = true, err.Error()
	}
	var lines []string
	for i := int64(1); ; i++ {
		v := out.Get(rt.IntValue(i))
		if v.IsNil() {
			break
		}
		s, _ := v.TryString()
		lines = append(lines, s)
	}
	res.out = strings.Join(lines, "\n")
	return res
}

// referenceDriver runs every program given on stdin with the reference
// fennel.lua and prints "\x01name", the output, then "\x02ok" or "\x02error".
const referenceDriver = `package.path = arg[1] .. "/?.lua;" .. package.path
local fennel = require("fennel")
local mkprint = load(arg[2])
local names, srcs = {}, {}
local data = io.read("a")
for name, src in data:gmatch("\1([^\n]*)\n(.-)\2") do
  names[#names + 1] = name; srcs[#srcs + 1] = src
end
for i, name in ipairs(names) do
  local out = {}
  local env = setmetatable({}, {__index = _G})
  env._G = env
  env.print = mkprint(out, tostring, select, table.concat, math.type, string.format)
  env.fennel = fennel
  local ok, err = pcall(fennel.eval, srcs[i], {env = env, filename = name, allowedGlobals = false, ["error-pinpoint"] = false})
  io.write("\1", name, "\n", table.concat(out, "\n"), "\2", ok and "ok" or ("error " .. tostring(err):gsub("\n", " ")), "\n")
end`

// referenceFennel finds the reference compiler, or says why it cannot.
func referenceFennel() (luaBin, fennelDir string, why string) {
	path := os.Getenv("NB_FENNEL_REFERENCE")
	if path == "" {
		path = filepath.Join("..", "..", ".cache", "fennel", "fennel.lua")
	}
	if _, err := os.Stat(path); err != nil {
		return "", "", fmt.Sprintf("%s not found", path)
	}
	bin, err := exec.LookPath("lua5.4")
	if err != nil {
		return "", "", "lua5.4 not installed"
	}
	abs, _ := filepath.Abs(filepath.Dir(path))
	return bin, abs, ""
}

func skipWithoutReference(t testing.TB) (string, string) {
	bin, dir, why := referenceFennel()
	if why != "" {
		t.Skipf("REFERENCE FENNEL MISSING (%s): run scripts/fetch-fennel; differential tests skipped", why)
	}
	return bin, dir
}

// runReference runs all programs through lua5.4 and the reference compiler.
func runReference(t testing.TB, bin, dir string, progs []program) map[string]result {
	var in bytes.Buffer
	for _, p := range progs {
		fmt.Fprintf(&in, "\x01%s\n%s\x02", p.name, p.src)
	}
	driver := filepath.Join(t.TempDir(), "driver.lua")
	if err := os.WriteFile(driver, []byte(referenceDriver), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, driver, dir, printLua)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("reference run failed: %v\n%s", err, stderr.String())
	}
	res := map[string]result{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	sc.Split(func(data []byte, atEOF bool) (int, []byte, error) {
		start := bytes.IndexByte(data, 1)
		if start < 0 {
			if atEOF {
				return len(data), nil, nil
			}
			return 0, nil, nil
		}
		end := bytes.IndexByte(data[start:], 2)
		if end < 0 {
			if atEOF {
				return len(data), nil, nil
			}
			return 0, nil, nil
		}
		nl := bytes.IndexByte(data[start+end:], '\n')
		if nl < 0 {
			if atEOF {
				return len(data), data[start : start+end], nil
			}
			return 0, nil, nil
		}
		return start + end + nl + 1, data[start : start+end+nl], nil
	})
	for sc.Scan() {
		rec := sc.Text()[1:]
		name, rest, _ := strings.Cut(rec, "\n")
		body, status, _ := strings.Cut(rest, "\x02")
		res[name] = result{out: body, failed: status != "ok", err: strings.TrimPrefix(status, "error ")}
	}
	return res
}
