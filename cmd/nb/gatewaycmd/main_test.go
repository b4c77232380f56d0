package gatewaycmd

// The configurations of these tests name OpenAI-compatible providers;
// cmd/nb links every provider.
import (
	"bytes"
	"context"
	"testing"

	_ "github.com/nbots/nb/provider/openai"
)

// runNB runs nb gateway's commands as cmd/nb does (args start with
// "gateway"), with the environment environ, and returns the exit status
// and both outputs.
func runNB(t *testing.T, environ []string, args ...string) (int, string, string) {
	t.Helper()
	if len(args) == 0 || args[0] != "gateway" {
		t.Fatalf("runNB runs nb gateway commands, not %q", args)
	}
	var out, errs bytes.Buffer
	code := Main(context.Background(), args[1:], Process{Environ: environ, Stdout: &out, Stderr: &errs})
	return code, out.String(), errs.String()
}
