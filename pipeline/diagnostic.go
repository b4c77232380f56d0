package pipeline

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Severity is a diagnostic's severity (§7.1).
type Severity uint8

// The severities of §7.1. An Error refuses the run.
const (
	Error Severity = iota
	Warning
	Info
)

// String returns "error", "warning" or "info".
func (s Severity) String() string {
	switch s {
	case Error:
		return "error"
	case Warning:
		return "warning"
	case Info:
		return "info"
	}
	return fmt.Sprintf("severity(%d)", uint8(s))
}

// MarshalText writes the severity's name.
func (s Severity) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// Diagnostic is one finding of the parser or a lint rule (§7.1).
type Diagnostic struct {
	// Rule is the rule id (§7.2's, or nb's own).
	Rule     string   `json:"rule"`
	Severity Severity `json:"severity"`
	Message  string   `json:"message"`
	Pos      Pos      `json:"-"`
	// Node is the related node's ID; Edge the related edge as "a -> b".
	Node string `json:"node,omitempty"`
	Edge string `json:"edge,omitempty"`
	// Fix suggests what to change.
	Fix string `json:"fix,omitempty"`
}

// String formats d as FILE:LINE:COL: severity: rule: message (node X),
// the form compilers use so editors can jump to it.
func (d Diagnostic) String(file string) string {
	var b strings.Builder
	b.WriteString(file)
	if d.Pos.IsValid() {
		fmt.Fprintf(&b, ":%d:%d", d.Pos.Line, d.Pos.Col)
	}
	fmt.Fprintf(&b, ": %s: %s: %s", d.Severity, d.Rule, d.Message)
	switch {
	case d.Edge != "":
		fmt.Fprintf(&b, " (edge %s)", d.Edge)
	case d.Node != "":
		fmt.Fprintf(&b, " (node %s)", d.Node)
	}
	return b.String()
}

// HasErrors reports whether any diagnostic is an Error.
func HasErrors(ds []Diagnostic) bool {
	for _, d := range ds {
		if d.Severity == Error {
			return true
		}
	}
	return false
}

// UnmarshalText reads "error", "warning" or "info".
func (s *Severity) UnmarshalText(b []byte) error {
	switch string(b) {
	case "error":
		*s = Error
	case "warning":
		*s = Warning
	case "info":
		*s = Info
	default:
		return fmt.Errorf("unknown severity %q (error, warning, info)", b)
	}
	return nil
}

// UnmarshalJSON reads what MarshalJSON writes, line and column included.
func (d *Diagnostic) UnmarshalJSON(b []byte) error {
	type plain Diagnostic
	var v struct {
		plain
		Line int `json:"line"`
		Col  int `json:"col"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*d = Diagnostic(v.plain)
	d.Pos = Pos{v.Line, v.Col}
	return nil
}
