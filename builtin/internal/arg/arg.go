// Package arg reads the arguments of a built-in tool's call, with errors
// that tell the model which argument is wrong and how to fix it. The
// agent validates calls against the tool's schema first; these readers
// keep a tool correct when it is called some other way (a test, a
// front-end without validation) and accept what models commonly send
// instead (a number as text, a whole number as 3.0).
package arg

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// String returns a text argument; required makes absence an error.
func String(args map[string]any, name string, required bool) (string, error) {
	v, ok := args[name]
	if !ok || v == nil {
		if required {
			return "", fmt.Errorf("the argument %s is missing: give it as text", name)
		}
		return "", nil
	}
	s, isText := v.(string)
	if !isText {
		return "", fmt.Errorf("the argument %s must be text, not %s", name, kind(v))
	}
	return s, nil
}

// Int returns a whole-number argument, def when absent, refusing values
// outside [min, max].
func Int(args map[string]any, name string, def, min, max int) (int, error) {
	v, ok := args[name]
	if !ok || v == nil {
		return def, nil
	}
	var f float64
	switch t := v.(type) {
	case int64:
		f = float64(t)
	case int:
		f = float64(t)
	case float64:
		f = t
	case json.Number:
		n, err := t.Float64()
		if err != nil {
			return 0, fmt.Errorf("the argument %s must be a whole number, not %q", name, t)
		}
		f = n
	case string:
		n, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
		if err != nil {
			return 0, fmt.Errorf("the argument %s must be a whole number, not %q", name, t)
		}
		f = n
	default:
		return 0, fmt.Errorf("the argument %s must be a whole number, not %s", name, kind(v))
	}
	if f != math.Trunc(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("the argument %s must be a whole number, not %v", name, v)
	}
	if f < float64(min) || f > float64(max) {
		return 0, fmt.Errorf("the argument %s must be between %d and %d, not %v", name, min, max, v)
	}
	return int(f), nil
}

// Bool returns a true/false argument, def when absent.
func Bool(args map[string]any, name string, def bool) (bool, error) {
	v, ok := args[name]
	if !ok || v == nil {
		return def, nil
	}
	switch t := v.(type) {
	case bool:
		return t, nil
	case string:
		switch strings.ToLower(strings.TrimSpace(t)) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
	}
	return false, fmt.Errorf("the argument %s must be true or false, not %v", name, v)
}

// Strings returns a list-of-text argument (one text counts as a list of one).
func Strings(args map[string]any, name string) ([]string, error) {
	v, ok := args[name]
	if !ok || v == nil {
		return nil, nil
	}
	switch t := v.(type) {
	case string:
		return []string{t}, nil
	case []string:
		return t, nil
	case []any:
		out := make([]string, 0, len(t))
		for i, x := range t {
			s, isText := x.(string)
			if !isText {
				return nil, fmt.Errorf("the argument %s[%d] must be text, not %s", name, i, kind(x))
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("the argument %s must be a list of text, not %s", name, kind(v))
}

func kind(v any) string {
	switch v.(type) {
	case string:
		return "text"
	case bool:
		return "true/false"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case nil:
		return "null"
	}
	return "a number"
}
