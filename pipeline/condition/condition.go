// Package condition is attractor's edge condition language (§10 of
// attractor-spec.md at fb57a55): clauses `key=literal`, `key!=literal` or
// a bare key, joined by `&&`, evaluated exactly as §10.5's pseudocode
// does. Parse also rejects what §10 does not have (`||`, `==`, `>`,
// `contains`, empty keys, unclosed quotes), which the evaluator would
// otherwise read silently as something else (choice D10).
package condition

import (
	"fmt"
	"strings"
)

// Op is a clause's operator.
type Op uint8

// The operators: a bare key is a truthy test (§10.5).
const (
	OpEq Op = iota
	OpNe
	OpTruthy
)

// Clause is one `key op literal` test.
type Clause struct {
	Key string
	Op  Op
	// Literal is the value compared with, unquoted and unescaped.
	Literal string
	// Offset is where the clause starts in the condition text (bytes).
	Offset int
}

// Expr is a parsed condition: its clauses, all of which must hold. The
// empty Expr is always true.
type Expr struct {
	Clauses []Clause
}

// SyntaxError is a condition that §10 does not define.
type SyntaxError struct {
	// Offset is the byte offset in the condition text where the problem
	// is.
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string { return e.Msg }

// Parse reads a condition. An empty (or blank) condition gives the empty
// Expr, which is always true.
func Parse(s string) (Expr, error) {
	if i := strings.Index(s, "||"); i >= 0 && !inQuotes(s, i) {
		return Expr{}, &SyntaxError{i, "`||` is not in the condition language (§10 has only `&&`): write one edge per alternative"}
	}
	var e Expr
	start := 0
	parts := splitAnd(s)
	for i, part := range parts {
		off := start
		start += len(part) + 2
		trimmed := strings.TrimSpace(part)
		if trimmed == "" {
			continue // §10.5: empty clauses are skipped
		}
		off += strings.Index(part, trimmed)
		c, err := parseClause(trimmed, off)
		if err != nil {
			if se, ok := err.(*SyntaxError); ok && i+1 < len(parts) && strings.HasPrefix(se.Msg, "unclosed quote") {
				se.Msg += " (a quoted value cannot hold &&: §10.5 splits the condition on every &&)"
			}
			return Expr{}, err
		}
		e.Clauses = append(e.Clauses, c)
	}
	return e, nil
}

// splitAnd splits on "&&" as §10.5 does (a plain split: an "&&" inside a
// quoted literal splits too, as it does in the reference evaluator).
func splitAnd(s string) []string { return strings.Split(s, "&&") }

// inQuotes reports whether byte i of s is inside a double-quoted run.
func inQuotes(s string, i int) bool {
	in := false
	for j := 0; j < i; j++ {
		switch s[j] {
		case '\\':
			if in {
				j++
			}
		case '"':
			in = !in
		}
	}
	return in
}

func parseClause(c string, off int) (Clause, error) {
	var key, lit string
	var op Op
	var litOff int
	if i := strings.Index(c, "!="); i >= 0 {
		key, lit, op, litOff = c[:i], c[i+2:], OpNe, i+2
	} else if i := strings.Index(c, "="); i >= 0 {
		key, lit, op, litOff = c[:i], c[i+1:], OpEq, i+1
		if strings.HasPrefix(lit, "=") {
			return Clause{}, &SyntaxError{off + i, "`==` is not an operator: write `" + strings.TrimSpace(key) + "=" + strings.TrimSpace(lit[1:]) + "` (with `==` the value compared would start with `=`)"}
		}
	} else {
		key, op = c, OpTruthy
	}
	key = strings.TrimSpace(key)
	if err := checkKey(key, off); err != nil {
		return Clause{}, err
	}
	cl := Clause{Key: key, Op: op, Offset: off}
	if op == OpTruthy {
		return cl, nil
	}
	value, err := parseLiteral(lit, off+litOff)
	if err != nil {
		return Clause{}, err
	}
	cl.Literal = value
	return cl, nil
}

// checkKey accepts §10.2's keys and, as D10 chooses, the unqualified keys
// §10.4 resolves (tool.output): identifiers joined by dots.
func checkKey(key string, off int) error {
	if key == "" {
		return &SyntaxError{off, "a clause has no key before its operator: write `outcome=success` or `context.KEY=value`"}
	}
	for _, word := range []string{">", "<", " contains ", " matches ", "NOT ", "!"} {
		if strings.Contains(key, word) || strings.HasPrefix(key, strings.TrimSpace(word)+" ") {
			return &SyntaxError{off + strings.Index(key, strings.TrimSpace(word)), fmt.Sprintf("%q is not in the condition language (§10 has only `=`, `!=` and `&&`; §10.7 forbids adding operators)", strings.TrimSpace(word))}
		}
	}
	for _, seg := range strings.Split(key, ".") {
		if !isIdent(seg) {
			if seg == "" {
				return &SyntaxError{off, fmt.Sprintf("key %q has an empty part: keys are names joined by dots (context.tests_passed)", key)}
			}
			return &SyntaxError{off, fmt.Sprintf("key %q is not a name: keys are outcome, preferred_label, context.PATH or a context key, made of letters, digits, _ and dots", key)}
		}
	}
	return nil
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9' {
			continue
		}
		return false
	}
	return true
}

// parseLiteral is §10.5's parse_literal, stricter: a quoted literal must
// close, and an unquoted one must be one word of the grammar's
// characters.
func parseLiteral(lit string, off int) (string, error) {
	t := strings.TrimSpace(lit)
	off += strings.Index(lit, t)
	if strings.HasPrefix(t, `"`) {
		if len(t) < 2 || !strings.HasSuffix(t, `"`) || strings.HasSuffix(t, `\"`) && !strings.HasSuffix(t, `\\"`) {
			return "", &SyntaxError{off, "unclosed quote in " + t + ": end the value with \""}
		}
		return unescape(t[1 : len(t)-1]), nil
	}
	for i := 0; i < len(t); i++ {
		switch c := t[i]; c {
		case ' ', '\t', '\n', '"', '=', '!', '<', '>', '|', '&', '(', ')':
			return "", &SyntaxError{off + i, fmt.Sprintf("value %q is not one word: quote it (key=\"a value\")", t)}
		}
	}
	return t, nil
}

// unescape decodes \" \\ \n \t; other backslashes stay as written.
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case '"', '\\':
				b.WriteByte(s[i+1])
				i++
				continue
			case 'n':
				b.WriteByte('\n')
				i++
				continue
			case 't':
				b.WriteByte('\t')
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// Eval evaluates e (§10.4, §10.5): outcome is the executing node's status
// in lowercase (success, partial_success, retry, fail), preferredLabel its
// preferred_label, and ctx looks a key up in the run's context.
func (e Expr) Eval(outcome, preferredLabel string, ctx func(key string) (string, bool)) bool {
	for _, c := range e.Clauses {
		v := Resolve(c.Key, outcome, preferredLabel, ctx)
		switch c.Op {
		case OpEq:
			if v != c.Literal {
				return false
			}
		case OpNe:
			if v == c.Literal {
				return false
			}
		case OpTruthy:
			// §10.5: bool(string): any non-empty value, "false" included.
			if v == "" {
				return false
			}
		}
	}
	return true
}

// Resolve is §10.4's resolve_key.
func Resolve(key, outcome, preferredLabel string, ctx func(string) (string, bool)) string {
	switch key {
	case "outcome":
		return outcome
	case "preferred_label":
		return preferredLabel
	}
	if ctx == nil {
		return ""
	}
	if v, ok := ctx(key); ok {
		return v
	}
	if rest, ok := strings.CutPrefix(key, "context."); ok {
		if v, ok := ctx(rest); ok {
			return v
		}
	}
	return ""
}

// String writes e back in the condition language.
func (e Expr) String() string {
	parts := make([]string, len(e.Clauses))
	for i, c := range e.Clauses {
		switch c.Op {
		case OpEq:
			parts[i] = c.Key + "=" + quote(c.Literal)
		case OpNe:
			parts[i] = c.Key + "!=" + quote(c.Literal)
		default:
			parts[i] = c.Key
		}
	}
	return strings.Join(parts, " && ")
}

func quote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n\"=!<>|&()\\") {
		return s
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\t", `\t`)
	return `"` + r.Replace(s) + `"`
}
