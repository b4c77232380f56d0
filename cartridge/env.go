package cartridge

import (
	"fmt"
	"os"
	"regexp"
)

// envRef matches the values the specification substitutes: ENV/NAME or
// ENV-NAME where NAME is a valid variable name. The reference replaced every
// string that merely begins with "ENV" (so "ENVIRONMENT is hostile" read the
// variable RONMENT); nb follows the specification's intent instead.
var envRef = regexp.MustCompile(`^ENV[/-]([A-Za-z_][A-Za-z0-9_]*)$`)

// EnvVar returns the variable an ENV reference names, if s is one.
func EnvVar(s string) (string, bool) {
	m := envRef.FindStringSubmatch(s)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// substituteEnv replaces ENV references in mapping values and sequence
// elements (not keys) with the environment's values. An unset variable
// gives null and is recorded in missing.
func substituteEnv(v any, path string, missing *[]MissingEnv) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, x := range t {
			p := k
			if path != "" {
				p = path + "." + k
			}
			out[k] = substituteEnv(x, p, missing)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = substituteEnv(x, fmt.Sprintf("%s[%d]", path, i), missing)
		}
		return out
	case string:
		name, ok := EnvVar(t)
		if !ok {
			return t
		}
		val, set := os.LookupEnv(name)
		if !set {
			*missing = append(*missing, MissingEnv{Path: path, Var: name})
			return nil
		}
		return val
	}
	return v
}
