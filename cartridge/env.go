package cartridge

import (
	"fmt"
	"regexp"
	"sync"
)

// envRef matches the values the specification substitutes: ENV/NAME or
// ENV-NAME where NAME is a valid variable name. The reference replaced every
// string that merely begins with "ENV" (so "ENVIRONMENT is hostile" read the
// variable RONMENT); nb follows the specification's intent instead.
var envRef = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^ENV[/-]([A-Za-z_][A-Za-z0-9_]*)$`) })

// EnvVar returns the variable an ENV reference names, if s is one.
func EnvVar(s string) (string, bool) {
	m := envRef().FindStringSubmatch(s)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// substituteEnv replaces ENV references in mapping values and sequence
// elements (not keys) with the values env gives. Every reference is
// recorded in refs; an unset variable gives null and is recorded in
// missing too.
func substituteEnv(v any, path string, env Lookup, refs, missing *[]EnvRef) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			p := k
			if path != "" {
				p = path + "." + k
			}
			out[k] = substituteEnv(x, p, env, refs, missing)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = substituteEnv(x, fmt.Sprintf("%s[%d]", path, i), env, refs, missing)
		}
		return out
	case string:
		name, ok := EnvVar(t)
		if !ok {
			return t
		}
		*refs = append(*refs, EnvRef{Path: path, Var: name})
		var val string
		set := false
		if env != nil {
			val, set = env(name)
		}
		if !set {
			*missing = append(*missing, MissingEnv{Path: path, Var: name})
			return nil
		}
		return val
	}
	return v
}
