package openaiapi

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/internal/npmtest"
	"github.com/nbots/nb/provider/providertest"
)

// clientBrain echoes, and fails when asked to: the whole request, or a
// stream once it began.
func clientBrain(turn providertest.Turn) providertest.Reply {
	switch turn.LastUser() {
	case "fail please":
		return providertest.Reply{Status: 500}
	case "break midway":
		return providertest.Reply{Chunks: []string{"Hel", "lo"}, StreamError: "The model crashed."}
	}
	return providertest.Echo(turn)
}

// Real clients, installed from npm by scripts/fetch-npm, talk to the
// handlers: the openai SDK, the ai SDK with @ai-sdk/openai-compatible,
// and @openai/agents on the Responses endpoint.
func TestRealClients(t *testing.T) {
	npmtest.Dir(t, "openai")
	s := newTestServer(t, clientBrain, map[string]string{"echo": cartridgeOn("openai", "")}, Options{})
	for _, script := range []string{"openai-sdk.mjs", "ai-sdk.mjs", "agents.mjs"} {
		t.Run(script, func(t *testing.T) {
			runClient(t, script, s.URL+"/v1", "echo")
		})
	}
}

// runClient runs a node script against baseURL and fails with its output
// when it fails.
func runClient(t *testing.T, script, baseURL, model string, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env = append(env, "NB_BASE_URL="+baseURL, "NB_TOKEN=test-token", "NB_MODEL="+model)
	out, err := npmtest.Node(ctx, t, "openai", script, env...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	if !strings.Contains(string(out), "ok ") {
		t.Fatalf("%s printed no result:\n%s", script, out)
	}
	t.Logf("%s:\n%s", script, out)
}
