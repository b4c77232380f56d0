package robopage

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// The values of the `allow` key of a parameter (an nb extension): what a
// page lets callers pass that nb otherwise refuses.
const (
	// AllowLeadingDash lets a value that starts an argument begin with
	// "-": the program then reads it as an option.
	AllowLeadingDash = "leading-dash"
	// AllowParentDir lets a value hold a ".." path segment.
	AllowParentDir = "parent-dir"
)

// number is a negative number, which may start an argument: -5, -1.5, -2e3.
var number = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^-[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$`) })

// checkValue returns the Scope.Check of f's calls. Values are placed in
// command lines verbatim, so a value that starts an argument with "-"
// becomes an option of the program ({"file": "-o/tmp/x"} for
// [sort, "${file}"] writes a file), and a ".." segment reaches outside
// the folder a page means (cat data/${name}.txt). Both are refused unless
// the parameter's `allow` lets them through.
func checkValue(f *Function) func(name, value string, first bool) error {
	return func(name, value string, first bool) error {
		p := f.Parameter(name)
		if p == nil {
			return nil
		}
		if first && strings.HasPrefix(value, "-") && !number().MatchString(value) && !p.AllowLeadingDash {
			return fmt.Errorf("argument %s of function %s starts with \"-\" (%s) and would be read as an option: pass a value that does not start with \"-\" (a page allows it with `allow: [%s]` on the parameter)", name, f.Name, quoteShort(value), AllowLeadingDash)
		}
		if hasParentSegment(value) && !p.AllowParentDir {
			return fmt.Errorf("argument %s of function %s has a \"..\" path segment (%s) and could reach outside the folder the page means: pass a path without \"..\" (a page allows it with `allow: [%s]` on the parameter)", name, f.Name, quoteShort(value), AllowParentDir)
		}
		return nil
	}
}

// hasParentSegment reports whether a path-like value has a ".." segment.
func hasParentSegment(v string) bool {
	for _, seg := range strings.FieldsFunc(v, func(r rune) bool { return r == '/' || r == '\\' }) {
		if seg == ".." {
			return true
		}
	}
	return false
}

// quoteShort quotes a value for a message, cut to 40 characters.
func quoteShort(v string) string {
	if r := []rune(v); len(r) > 40 {
		v = string(r[:40]) + "…"
	}
	return fmt.Sprintf("%q", v)
}
