package handler

import (
	"strings"
	"sync"
	"testing"

	"github.com/nbots/nb/pipeline/engine"
	"github.com/nbots/nb/provider/providertest"
)

// §5.4: nodes that share a thread at `full` fidelity share the
// conversation; other fidelities start afresh with a preamble.
func TestFullFidelityThreads(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{} // a stage's prompt word -> messages in its request
	inner := newFake(map[string][]string{}).brain
	wrap := func(turn providertest.Turn) providertest.Reply {
		mu.Lock()
		for _, w := range []string{"FIRST", "SECOND", "THIRD"} {
			if strings.Contains(turn.LastUser(), w) {
				seen[w] = len(turn.Messages)
			}
		}
		mu.Unlock()
		return inner(turn)
	}
	src := `digraph F {
  start [shape=Mdiamond]
  exit [shape=Msquare]
  a [prompt="FIRST", fidelity=full, thread_id=w]
  b [prompt="SECOND", fidelity=full, thread_id=w]
  c [prompt="THIRD"]
  start -> a -> b -> c -> exit
}`
	r := runFlow(t, src, Options{Backend: backendWithBrain(t, wrap)})
	r.want(t, engine.Success, "start,a,b,c,exit")
	mu.Lock()
	defer mu.Unlock()
	if seen["SECOND"] <= seen["FIRST"] {
		t.Errorf("b did not continue a's conversation: %v messages", seen)
	}
	if seen["THIRD"] > seen["FIRST"] {
		t.Errorf("c (compact) carried the thread: %v messages", seen)
	}
	if p := read(t, r.dir+"/c/prompt.md"); !strings.Contains(p, "Completed stages:\n- start: success\n- a: success\n- b: success") {
		t.Errorf("c's compact preamble:\n%s", p)
	}
}
