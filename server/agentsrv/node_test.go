package agentsrv

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/internal/npmtest"
	"github.com/nbots/nb/provider/providertest"
)

// A client not written in Go drives the protocol: a node script using
// the ws package from npm runs an agent, answers its call to the
// script's own tool and reads the final result.
func TestNodeClient(t *testing.T) {
	npmtest.Dir(t, "agents")
	url, _ := fakeOpenAI(t, providertest.Echo)
	srv, _ := serve(t, nil, newAgent(t, t.TempDir(), url, "Echo", ""))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := npmtest.Node(ctx, t, "agents", "run-agent.mjs", "AGENT_URL=ws"+strings.TrimPrefix(srv.URL, "http")+"/agents/Echo/run")
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("node: %v\n%s%s", err, out, stderr)
	}
	var got struct {
		Result  string         `json:"result"`
		Context map[string]any `json:"context"`
		Frames  []string       `json:"frames"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got.Result != "tool clock said: 09:00 in UTC" || got.Context["client"] != "node" {
		t.Errorf("node got %s", out)
	}
	if frames := strings.Join(got.Frames, " "); !strings.HasPrefix(frames, "run_started step tool_call step_chunk") || !strings.HasSuffix(frames, "step final_result") {
		t.Errorf("frames %s", frames)
	}
}
