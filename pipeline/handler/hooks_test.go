package handler

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nbots/nb/pipeline/engine"
	"github.com/nbots/nb/provider/providertest"
)

const answerTool = `tools:
  - name: answer
    description: The answer.
    lua: |
      return 42
`

// §9.7: tool_hooks.pre and .post run around an LLM stage's tool calls; a
// pre hook that exits non-zero skips the call and the model is told.
func TestHooksAroundLLMToolCalls(t *testing.T) {
	var mu sync.Mutex
	var results []string
	brain := func(turn providertest.Turn) providertest.Reply {
		if last := turn.Last(); last.Role == "tool" {
			mu.Lock()
			results = append(results, last.Content)
			mu.Unlock()
			return providertest.Reply{Chunks: []string{"done"}}
		}
		return providertest.Reply{Calls: []providertest.Call{{ID: "c1", Name: "answer", Arguments: "{}"}}}
	}
	dir := t.TempDir()
	flow := func(pre string) string {
		return `digraph H {
  graph [tool_hooks.pre="` + pre + `", tool_hooks.post="cat >> ` + filepath.Join(dir, "post.log") + `"]
  start [shape=Mdiamond]
  exit [shape=Msquare]
  n [prompt="use the tool"]
  start -> n -> exit
}`
	}
	r := runFlow(t, flow("cat > "+filepath.Join(dir, "pre.json")), Options{Backend: backendWithBrain(t, brain, answerTool)})
	r.want(t, engine.Success, "start,n,exit")
	pre, _ := os.ReadFile(filepath.Join(dir, "pre.json"))
	post, _ := os.ReadFile(filepath.Join(dir, "post.log"))
	if !strings.Contains(string(pre), `"hook":"pre","node":"n","tool":"answer"`) || !strings.Contains(string(post), `"output":"42"`) {
		t.Errorf("pre hook read %s; post hook read %s", pre, post)
	}
	r = runFlow(t, flow("exit 7"), Options{Backend: backendWithBrain(t, brain, answerTool)})
	r.want(t, engine.Success, "start,n,exit")
	mu.Lock()
	defer mu.Unlock()
	if len(results) != 2 || results[0] != "42" || !strings.Contains(results[1], "tool_hooks.pre exited 7: tool call answer of node n skipped") {
		t.Errorf("the model saw %q", results)
	}
}
