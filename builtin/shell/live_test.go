package shell

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nbots/nb/tool"
)

// TestLiveOutput: exec passes the command's output on while it runs. The
// command prints a line, then waits for a file the test writes only when
// it has seen that line: without live output it would wait for its
// timeout. The result is the whole output, as before; a rune cut between
// two writes arrives whole.
func TestLiveOutput(t *testing.T) {
	modes(t, func(t *testing.T, mk func(Options) *Exec) {
		e := mk(Options{})
		gate := filepath.Join(e.cfg.Workspace, "go-on")
		var mu sync.Mutex
		var got []string
		live := func(stream, text string) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, stream+":"+text)
			if strings.Contains(text, "first") {
				os.WriteFile(gate, nil, 0o644) //nolint:errcheck // the command times out without it
			}
		}
		ctx := tool.WithLiveOutput(context.Background(), live)
		cmd := `echo first; for i in $(seq 500); do [ -e go-on ] && break; sleep 0.01; done; [ -e go-on ] || echo never; printf 'caf\303'; sleep 0.05; printf '\251\n'; echo oops >&2`
		out, err := e.Run(ctx, tool.Call{Name: "exec", Arguments: map[string]any{"command": cmd, "timeout": 20}})
		if err != nil {
			t.Fatal(err)
		}
		if out != "first\ncafé\nSTDERR:\noops\nExit code: 0" {
			t.Errorf("result %q", out)
		}
		mu.Lock()
		defer mu.Unlock()
		var stdout, stderr strings.Builder
		for _, g := range got {
			stream, text, _ := strings.Cut(g, ":")
			if stream == "stdout" {
				stdout.WriteString(text)
			} else {
				stderr.WriteString(text)
			}
		}
		if stdout.String() != "first\ncafé\n" || stderr.String() != "oops\n" || len(got) < 3 {
			t.Errorf("live output %q", got)
		}
	})
}
