// Package npmtest finds the npm packages that scripts/fetch-npm installs
// for interoperability tests (real clients and servers written by
// others), and runs node scripts against them. A test that needs a
// package that is not installed skips with a loud message that says how
// to install it.
package npmtest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Root returns the repository's root folder (where go.mod is).
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("npmtest: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Dir returns .cache/npm/<name>, where scripts/fetch-npm installed the
// packages of testdata/npm/<name>; it skips the test when they are not
// installed or node is missing.
func Dir(t testing.TB, name string) string {
	t.Helper()
	dir := filepath.Join(Root(t), ".cache", "npm", name)
	if _, err := os.Stat(filepath.Join(dir, ".installed")); err != nil {
		t.Skipf("SKIPPING: the npm packages of testdata/npm/%s are not installed in %s: run scripts/fetch-npm", name, dir)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Skip("SKIPPING: node is not installed: run scripts/fetch-npm (it installs Debian's nodejs)")
	}
	return dir
}

// Node returns a command that runs node with script (a path, or a file
// of testdata/npm/<name>/) in .cache/npm/<name>, so require() and import
// find that folder's node_modules. env is added to a minimal environment.
func Node(ctx context.Context, t testing.TB, name, script string, env ...string) *exec.Cmd {
	t.Helper()
	dir := Dir(t, name)
	if !filepath.IsAbs(script) {
		script = filepath.Join(Root(t), "testdata", "npm", name, script)
	}
	// Copy the script beside node_modules: ES modules resolve packages
	// from the script's own folder, not from the working directory.
	data, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	local := filepath.Join(dir, "run-"+filepath.Base(script))
	if err := os.WriteFile(local, data, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "node", local)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	return cmd
}
