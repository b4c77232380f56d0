package main

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var updateHelp = flag.Bool("update-help", false, "rewrite testdata/help from the current --help texts")

// TestGatewayHelpGolden pins the --help text of every gateway command
// byte for byte, so moving the gateway's assembly out of package main
// (or anything else) changes no word a user reads without a reviewer
// seeing it in testdata/help. After an intended change:
// go test ./cmd/nb -run TestGatewayHelpGolden -update-help.
func TestGatewayHelpGolden(t *testing.T) {
	env := []string{"HOME=/nonexistent-home", "NB_DOTENV=0"}
	for _, path := range helpPaths {
		if path[0] != "gateway" {
			continue
		}
		args := append(slices.Clone(path), "--help")
		code, out, errOut := runNB(t, env, args...)
		if code != 0 || errOut != "" {
			t.Errorf("nb %s: exit %d, stderr %q", strings.Join(args, " "), code, errOut)
			continue
		}
		golden := filepath.Join("testdata", "help", strings.Join(path, "_")+".txt")
		if *updateHelp {
			if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Errorf("nb %s: %v (write it with -update-help)", strings.Join(args, " "), err)
			continue
		}
		if out != string(want) {
			t.Errorf("nb %s --help differs from %s:\n--- got\n%s\n--- want\n%s", strings.Join(path, " "), golden, out, want)
		}
	}
}
