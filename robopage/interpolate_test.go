package robopage

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func fakeEnv(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

// The reference's interpolation tests, plus placeholders inside longer
// elements and the extension's declared defaults.
func TestInterpolate(t *testing.T) {
	env := fakeEnv(map[string]string{"TEST_VAR": "test_value", "EMPTY": ""})
	tests := []struct {
		name     string
		elems    []string
		args     map[string]string
		defaults map[string]string
		want     []string
		wantEnv  map[string]string
		err      string
	}{
		{name: "argument", elems: []string{"${message}"}, args: map[string]string{"message": "Hello, World!"}, want: []string{"Hello, World!"}},
		{name: "default when missing", elems: []string{"${message or Default message}"}, want: []string{"Default message"}},
		{name: "default when empty", elems: []string{"${message or Default message}"}, args: map[string]string{"message": ""}, want: []string{"Default message"}},
		{name: "required missing", elems: []string{"${required_arg}"}, err: "argument required_arg not provided"},
		{name: "mixed", elems: []string{"${arg1}", "${arg2 or default}", "literal"}, args: map[string]string{"arg1": "value1"}, want: []string{"value1", "default", "literal"}},
		{name: "env", elems: []string{"${env.TEST_VAR}", "${ENV.TEST_VAR}"}, want: []string{"test_value", "test_value"}, wantEnv: map[string]string{"TEST_VAR": "test_value"}},
		{name: "env unset", elems: []string{"${env.UNDEFINED_VAR}"}, err: "environment variable UNDEFINED_VAR not set"},
		{name: "env unset default", elems: []string{"${env.UNDEFINED_VAR or default_value}"}, want: []string{"default_value"}},
		{name: "env empty ignores default", elems: []string{"${env.EMPTY or d}"}, want: []string{""}, wantEnv: map[string]string{"EMPTY": ""}},
		{name: "inside an element", elems: []string{"-o", "/data/tool-${target}.txt"}, args: map[string]string{"target": "example.com"}, want: []string{"-o", "/data/tool-example.com.txt"}},
		{name: "several in one element", elems: []string{"${a}:${b or 2}/${a}"}, args: map[string]string{"a": "x"}, want: []string{"x:2/x"}},
		{name: "given empty without default", elems: []string{"[${a}]"}, args: map[string]string{"a": ""}, want: []string{"[]"}},
		{name: "leading space matches", elems: []string{"${ a}"}, args: map[string]string{"a": "v"}, want: []string{"v"}},
		{name: "trailing space is literal", elems: []string{"${a }"}, args: map[string]string{"a": "v"}, want: []string{"${a }"}},
		{name: "default keeps spaces", elems: []string{"${a or  two words }"}, want: []string{"two words "}},
		{name: "no shell", elems: []string{"${a}"}, args: map[string]string{"a": "$(id); rm -rf / 'q' \"d\""}, want: []string{"$(id); rm -rf / 'q' \"d\""}},
		{name: "values are not expanded again", elems: []string{"${a}${b}"}, args: map[string]string{"a": "${b}", "b": "B"}, want: []string{"${b}B"}},
		{name: "declared default", elems: []string{"/w/${wordlist}"}, defaults: map[string]string{"wordlist": "big.txt"}, want: []string{"/w/big.txt"}},
		{name: "or default wins over declared", elems: []string{"${w or small}"}, defaults: map[string]string{"w": "big"}, want: []string{"small"}},
		{name: "unicode name", elems: []string{"${café}"}, args: map[string]string{"café": "ok"}, want: []string{"ok"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Scope{Args: tt.args, Defaults: tt.defaults, LookupEnv: env}
			var got []string
			for _, e := range tt.elems {
				v, err := s.Interpolate(e)
				if err != nil {
					if tt.err == "" || err.Error() != tt.err {
						t.Fatalf("Interpolate(%q) error %q, want %q", e, err, tt.err)
					}
					return
				}
				got = append(got, v)
			}
			if tt.err != "" {
				t.Fatalf("got %q, want error %q", got, tt.err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("arguments (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tt.wantEnv, s.Env); d != "" {
				t.Errorf("recorded environment (-want +got):\n%s", d)
			}
		})
	}
}

func FuzzInterpolate(f *testing.F) {
	for _, s := range []string{"${a}", "x${a or d}y", "${env.HOME}", "${ a}", "${a }", "${}", "${a or }}", "$${a}}", "${a.b.c or x y z}", "plain", "${\u00a0a\u3000or\u2028b}"} {
		f.Add(s, "value")
	}
	f.Add("${a}${b}", "${b}")
	f.Fuzz(func(t *testing.T, elem, value string) {
		s := &Scope{Args: map[string]string{"a": value, "b": value}, LookupEnv: fakeEnv(nil)}
		got, err := s.Interpolate(elem)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "argument ") && !strings.HasPrefix(err.Error(), "environment variable ") {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		if !placeholder().MatchString(elem) && got != elem {
			t.Fatalf("no placeholder in %q but got %q", elem, got)
		}
		// Values are inserted once: with a value free of "${", the result
		// of an element made only of ${a} is the value itself.
		if elem == "${a}" && value != "" && got != value {
			t.Fatalf("${a} = %q, want %q", got, value)
		}
	})
}
