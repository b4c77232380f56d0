package robopage

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const valuesPage = `description: values placed in command lines
functions:
  sort_file:
    description: Sort a file.
    parameters:
      file: {type: string, description: the file}
    cmdline: [sort, "${file}"]
  read_data:
    description: Print a data file.
    parameters:
      name: {type: string, description: the name}
    cmdline: [cat, "data/${name}.txt"]
  option:
    description: An option value.
    parameters:
      target: {type: string, description: the target}
    cmdline: [sh, -c, 'printf "%s|" "$@"', sh, "--target=${target}", "${target}"]
  allowed:
    description: A page that allows both.
    parameters:
      arg:
        type: string
        description: anything
        allow: [leading-dash, parent-dir]
    cmdline: [sh, -c, 'printf "%s|" "$@"', sh, "${arg}"]
`

// Values are placed in command lines verbatim, so a value that starts an
// argument with "-" is an option of the program, and ".." leaves the
// page's folder: both are refused, unless the parameter allows them.
func TestArgumentValues(t *testing.T) {
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	os.MkdirAll(filepath.Join(work, "data"), 0o755)
	os.WriteFile(filepath.Join(work, "data", "ok.txt"), []byte("fine\n"), 0o644)
	os.WriteFile(filepath.Join(work, "data", "in.txt"), []byte("b\na\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("s3cret\n"), 0o644)
	lib := parseLibrary(t, dir, valuesPage)
	ex := &Executor{Environ: os.Environ(), Dir: work}
	pwned := filepath.Join(dir, "pwned")

	out, err := call(t, ex, lib, "sort_file", map[string]string{"file": "-o" + pwned})
	if err == nil || !strings.Contains(err.Error(), `argument file of function sort_file starts with "-"`) || !strings.Contains(err.Error(), "allow: [leading-dash]") {
		t.Errorf("-o value: %q, %v", out, err)
	}
	if _, err := os.Stat(pwned); err == nil {
		t.Error("sort wrote the file a value named")
	}
	out, err = call(t, ex, lib, "read_data", map[string]string{"name": "../../secret"})
	if err == nil || !strings.Contains(err.Error(), `argument name of function read_data has a ".." path segment`) || strings.Contains(out, "s3cret") {
		t.Errorf("../ value: %q, %v", out, err)
	}
	for _, v := range []string{"..", "a/../../b", `..\x`, "x/.."} {
		if _, err := call(t, ex, lib, "read_data", map[string]string{"name": v}); err == nil {
			t.Errorf("%q was accepted", v)
		}
	}
	for _, tt := range []struct {
		fn, arg, value, want string
	}{
		{"read_data", "name", "ok", "fine\n"},
		{"read_data", "name", "...", "EXIT CODE"},      // not a parent folder
		{"read_data", "name", "a..b", "EXIT CODE"},     // idem
		{"sort_file", "file", "data/in.txt", "a\nb\n"}, // a plain path
		{"option", "target", "-5", "--target=-5|-5|"},  // numbers may be negative
		{"option", "target", "-1.5", "--target=-1.5|-1.5|"},
		{"allowed", "arg", "-o/x", "-o/x|"},
		{"allowed", "arg", "../x", "../x|"},
	} {
		out, err := call(t, ex, lib, tt.fn, map[string]string{tt.arg: tt.value})
		if err != nil || !strings.HasPrefix(out, tt.want) {
			t.Errorf("%s %s=%q: %q, %v; want %q", tt.fn, tt.arg, tt.value, out, err, tt.want)
		}
	}
	// A dash inside an argument is no option; at its start it is.
	if _, err := call(t, ex, lib, "option", map[string]string{"target": "-x"}); err == nil || !strings.Contains(err.Error(), "argument target of function option starts with") {
		t.Errorf("-x: %v", err)
	}
	// Defaults come from the page and are not checked.
	p, _ := Parse([]byte("functions:\n  f:\n    description: d\n    parameters:\n      a: {type: string, description: d, default: -n}\n    cmdline: [echo, '${a}', '${b or ../x}', x]\n"), "d.yml", "")
	out, err = call(t, ex, NewLibrary(dir, p), "f", nil)
	if err != nil || out != "../x x" { // echo -n: the page chose it
		t.Errorf("defaults: %q, %v", out, err)
	}
}

func TestParseAllow(t *testing.T) {
	p, ps := Parse([]byte("functions:\n  f:\n    description: d\n    parameters:\n      a: {type: string, description: d, allow: leading-dash}\n      b:\n        type: string\n        description: d\n        allow: [parent-dir, dashes]\n    cmdline: [echo, '${a}', '${b}']\n"), "a.yml", "")
	if p == nil {
		t.Fatal(ps)
	}
	a, b := p.Functions[0].Parameter("a"), p.Functions[0].Parameter("b")
	if !a.AllowLeadingDash || a.AllowParentDir || b.AllowLeadingDash || !b.AllowParentDir {
		t.Errorf("allow: a %+v, b %+v", a, b)
	}
	if len(ps) != 1 || ps[0].Severity != Warning || ps[0].String() != `a.yml:9: f: parameter b: unknown `+"`allow`"+` value "dashes" is ignored: use leading-dash or parent-dir` {
		t.Errorf("problems %v", ps)
	}
}
