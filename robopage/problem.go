package robopage

import (
	"fmt"
	"sort"
)

// Severity says how bad a Problem is.
type Severity int

const (
	// Warning: the page or function works, perhaps not as its author meant.
	Warning Severity = iota
	// Error: the page or function cannot be used. At load time the page
	// (or function) is skipped; at validation it is reported broken.
	Error
)

// String is "error" or "warning".
func (s Severity) String() string {
	if s == Error {
		return "error"
	}
	return "warning"
}

// Problem is something wrong with a page, found while loading or validating.
type Problem struct {
	// File is the page's path as found (relative to the working folder
	// when the library path was).
	File string
	// Line is the 1-based line of the problem; 0 when unknown.
	Line int
	// Function is the function concerned, empty for the page as a whole.
	Function string
	// Severity is Error when the page or function cannot be used.
	Severity Severity
	// Message says what is wrong and what to do.
	Message string
	// Engine is true for a problem of the container engine (missing, or
	// not answering) rather than of a page: File is then the library root.
	Engine bool
}

// String formats the problem as "file:line: [function: ]message".
func (p Problem) String() string {
	loc := p.File
	if p.Line > 0 {
		loc = fmt.Sprintf("%s:%d", p.File, p.Line)
	}
	if p.Function != "" {
		return fmt.Sprintf("%s: %s: %s", loc, p.Function, p.Message)
	}
	return fmt.Sprintf("%s: %s", loc, p.Message)
}

// sortProblems orders problems by file, line, function and message.
func sortProblems(ps []Problem) {
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if a.File != b.File {
			return a.File < b.File
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Function != b.Function {
			return a.Function < b.Function
		}
		return a.Message < b.Message
	})
}

// HasErrors reports whether any problem is an Error.
func HasErrors(ps []Problem) bool {
	for _, p := range ps {
		if p.Severity == Error {
			return true
		}
	}
	return false
}
