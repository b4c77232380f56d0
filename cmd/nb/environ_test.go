package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEnvironmentTable fails when nb's code (outside tests) names a
// variable of its own (NANO_BOTS_*, NB_*, ROBOPAGES_*) that the table
// `nb help` prints does not list: the help cannot drift from the code.
func TestEnvironmentTable(t *testing.T) {
	listed := map[string]bool{}
	for _, v := range environment {
		for _, name := range strings.Split(v.Name, ", ") {
			listed[name] = true
		}
	}
	// A variable nb sets on its own children to find them, never read from the user.
	internal := map[string]bool{"NB_PROC_CALL": true}
	re := regexp.MustCompile(`"((?:NANO_BOTS|NB|ROBOPAGES)_[A-Z0-9_]+)"`)
	err := filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".cache" || d.Name() == "testdata" || d.Name() == "node_modules" || d.Name() == "bench") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") || strings.Contains(p, "test/") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(data), -1) {
			if !listed[m[1]] && !internal[m[1]] {
				t.Errorf("%s reads %s, which nb help does not list (cmd/nb/environ.go)", p, m[1])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
