package robopage

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// placeholder is the reference's pattern, (?m)\$\{\s*([\w\.]+)(\s+or\s+([^}]+))?\},
// with Rust's Unicode \w and \s spelled out for Go's ASCII ones.
// placeholder is compiled on first use: its Unicode classes cost a
// noticeable part of nb's start-up, which most runs do not need.
var placeholder = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\$\{[\t\n\v\f\r\x{85}\p{Z}]*([\p{L}\p{M}\p{Nd}\p{Nl}\p{Pc}\x{200C}\x{200D}\.]+)([\t\n\v\f\r\x{85}\p{Z}]+or[\t\n\v\f\r\x{85}\p{Z}]+([^}]+))?\}`)
})

// Scope holds what placeholders are replaced with.
type Scope struct {
	// Args are the arguments of the call.
	Args map[string]string
	// Defaults are the parameters' `default:` values (an extension).
	Defaults map[string]string
	// LookupEnv reads the server's environment for ${env.NAME}; nil is an
	// empty environment (the caller passes nb's, see Executor.Environ).
	LookupEnv func(string) (string, bool)
	// Check, when set, vets each argument value placed in an element:
	// first says that nothing precedes the value in the element, so a
	// leading "-" would make it an option. Defaults are not checked.
	Check func(name, value string, first bool) error
	// Env records every variable read through ${env.NAME}: the child gets
	// exactly these from the server's environment.
	Env map[string]string
}

// Interpolate replaces the placeholders of one command-line element:
//
//	${name}              the argument name; an error when not given
//	${name or default}   the default when the argument is missing or empty
//	${env.NAME}          the server's environment variable NAME (also ENV.NAME)
//
// A given but empty argument without a default is the empty string; a set
// but empty variable is empty even with a default. Values are inserted
// verbatim and never interpolated again (the reference replaces one
// placeholder after another, so a value could expand a later one).
func (s *Scope) Interpolate(elem string) (string, error) {
	matches := placeholder().FindAllStringSubmatchIndex(elem, -1)
	if matches == nil {
		return elem, nil
	}
	var b strings.Builder
	last := 0
	for _, m := range matches {
		name := elem[m[2]:m[3]]
		def, hasDef := "", m[6] >= 0
		if hasDef {
			def = elem[m[6]:m[7]]
		}
		v, given, err := s.value(name, def, hasDef)
		if err != nil {
			return "", err
		}
		if given && s.Check != nil {
			if err := s.Check(name, v, b.Len()+m[0]-last == 0); err != nil {
				return "", err
			}
		}
		b.WriteString(elem[last:m[0]])
		b.WriteString(v)
		last = m[1]
	}
	b.WriteString(elem[last:])
	return b.String(), nil
}

// value is a placeholder's value; given is true when it is an argument
// of the call (not a default, not a variable).
func (s *Scope) value(name, def string, hasDef bool) (string, bool, error) {
	if v, ok := strings.CutPrefix(name, "env."); ok {
		v, err := s.env(v, def, hasDef)
		return v, false, err
	}
	if v, ok := strings.CutPrefix(name, "ENV."); ok {
		v, err := s.env(v, def, hasDef)
		return v, false, err
	}
	v, given := s.Args[name]
	if given && v != "" {
		return v, true, nil
	}
	if hasDef {
		return def, false, nil
	}
	if d, ok := s.Defaults[name]; ok {
		return d, false, nil
	}
	if given {
		return "", false, nil
	}
	return "", false, fmt.Errorf("argument %s not provided", name)
}

func (s *Scope) env(name, def string, hasDef bool) (string, error) {
	v, ok := "", false
	if s.LookupEnv != nil {
		v, ok = s.LookupEnv(name)
	}
	if !ok {
		if hasDef {
			return def, nil
		}
		return "", fmt.Errorf("environment variable %s not set", name)
	}
	if s.Env == nil {
		s.Env = map[string]string{}
	}
	s.Env[name] = v
	return v, nil
}

// Placeholders lists the names used by the placeholders of elem, without
// the env. ones.
func Placeholders(elem string) []string {
	var out []string
	for _, m := range placeholder().FindAllStringSubmatch(elem, -1) {
		if strings.HasPrefix(m[1], "env.") || strings.HasPrefix(m[1], "ENV.") {
			continue
		}
		out = append(out, m[1])
	}
	return out
}
