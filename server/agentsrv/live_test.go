package agentsrv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nbots/nb/agentproto"
	"github.com/nbots/nb/provider/providertest"
)

// TestLiveToolOutput: with events: true, a command's output comes as
// tool_call_output_delta event frames while it runs, with the id and
// name of its tool_result, which still carries the whole output. The
// command waits, after its first line, for a file the test writes only
// when that line's frame has arrived: without live output it would hang
// until its timeout. Each step's text begins with assistant_text_start.
func TestLiveToolOutput(t *testing.T) {
	dir := t.TempDir()
	gate := filepath.Join(dir, "go-on")
	cmd := `echo compiling; for i in $(seq 300); do [ -e go-on ] && break; sleep 0.01; done; [ -e go-on ] || echo never; echo done >&2`
	url, _ := fakeOpenAI(t, providertest.Scripted(
		providertest.Reply{Calls: []providertest.Call{{ID: "call_1", Name: "exec", Arguments: `{"command":` + providertest.JSONString(cmd) + `}`}}},
		providertest.Reply{Chunks: []string{"It ", "built."}},
	))
	body := "builtins: {exec: {workspace: " + dir + ", sandbox: off}}\n"
	srv, _ := serve(t, nil, newAgent(t, dir, url, "Builder", body))
	c := start(t, srv.URL, "Builder", &agentproto.Frame{Input: "build it", Events: true})
	var live, result, resultID string
	var deltaIDs []string
	var kinds []string
	end := c.finish(func(f *agentproto.Frame) {
		switch {
		case f.Type == agentproto.TypeEvent && f.Kind == "tool_call_output_delta":
			if f.Name != "exec" || (f.Stream != "stdout" && f.Stream != "stderr") {
				t.Errorf("delta frame %+v", f)
			}
			live += f.Stream + ":" + f.Delta
			deltaIDs = append(deltaIDs, f.ID)
			if strings.Contains(f.Delta, "compiling") {
				os.WriteFile(gate, nil, 0o644) //nolint:errcheck // the command prints "never" without it
			}
		case f.Type == agentproto.TypeEvent:
			kinds = append(kinds, f.Kind)
			if f.Kind == "assistant_text_start" && f.Step != 2 {
				t.Errorf("assistant_text_start at step %d", f.Step)
			}
		case f.Type == agentproto.TypeToolResult:
			result, _ = f.Output.(string)
			resultID = f.ID
		}
	})
	if end.Type != agentproto.TypeFinalResult || end.Result != "It built." {
		t.Fatalf("end %+v\n%s", end, c.dump())
	}
	if live != "stdout:compiling\nstderr:done\n" {
		t.Errorf("live output %q\n%s", live, c.dump())
	}
	for _, id := range deltaIDs {
		if id != resultID || id == "" {
			t.Errorf("delta id %q, tool_result id %q", id, resultID)
		}
	}
	if result != "compiling\nSTDERR:\ndone\nExit code: 0" {
		t.Errorf("tool_result %q", result)
	}
	if got := strings.Join(kinds, " "); got != "session_start user_input assistant_text_start session_end" {
		t.Errorf("events %s", got)
	}
}
