package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/nbots/nb/pipeline"
)

// checkJSON runs nb pipeline check --json FILE.
func checkJSON(t *testing.T, file string) (int, []byte) {
	t.Helper()
	code, out, _ := runNB(t, []string{"HOME=" + t.TempDir(), "NB_DOTENV=0"}, "pipeline", "check", "--json", file)
	return code, []byte(out)
}

// TestPipelineCheckJSONS10b is scenario S10(b): check --json resolves
// the §8.6 stylesheet with a shape rule, a subgraph class and its node
// defaults, and an explicit llm_model beats #id.
func TestPipelineCheckJSONS10b(t *testing.T) {
	code, out := checkJSON(t, "../../pipeline/testdata/s10b.dot")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	var rep checkReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatal(err)
	}
	if !rep.OK || rep.Graph == nil {
		t.Fatalf("%s", out)
	}
	nodes := map[string]pipeline.ResolvedNode{}
	for _, n := range rep.Graph.Nodes {
		nodes[n.ID] = n
	}
	tests := []struct {
		id, model, provider, effort, thread string
		timeoutMS                           int64
		modelFrom                           string
	}{
		{"plan", "claude-sonnet-4-5", "anthropic", "low", "", 0, "*"},
		{"implement", "claude-opus-4-6", "anthropic", "low", "", 0, ".code"},
		{"critical_review", "gpt-5.2", "openai", "high", "", 0, "#critical_review"},
		{"P", "m", "anthropic", "low", "loop-a", 900_000, ".loop-a"},
		{"I", "m", "anthropic", "low", "loop-a", 1_800_000, ".loop-a"},
	}
	for _, tt := range tests {
		n, ok := nodes[tt.id]
		e := n.Effective
		if !ok || e.LLMModel != tt.model || e.LLMProvider != tt.provider || e.ReasoningEffort != tt.effort || e.ThreadID != tt.thread || e.TimeoutMS != tt.timeoutMS {
			t.Errorf("%s: %+v", tt.id, e)
		}
		if a := n.Attrs["llm_model"]; a.Origin != pipeline.OriginStylesheet || a.Rule != tt.modelFrom {
			t.Errorf("%s llm_model from %+v, want the rule %s", tt.id, a, tt.modelFrom)
		}
	}
	if a := nodes["P"].Attrs["timeout"]; a.Origin != pipeline.OriginDefault || a.Line != 22 {
		t.Errorf("P timeout %+v", a)
	}

	// An explicit node llm_model beats #id.
	src, err := os.ReadFile("../../pipeline/testdata/s10b.dot")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "explicit.dot")
	src = append(src[:len(src)-2], []byte("critical_review [llm_model=\"mine\"]\n}\n")...)
	if err := os.WriteFile(file, src, 0o644); err != nil {
		t.Fatal(err)
	}
	code, out = checkJSON(t, file)
	rep = checkReport{}
	if err := json.Unmarshal(out, &rep); err != nil || code != 0 {
		t.Fatalf("exit %d, %v: %s", code, err, out)
	}
	for _, n := range rep.Graph.Nodes {
		if n.ID == "critical_review" && (n.Effective.LLMModel != "mine" || n.Effective.LLMProvider != "openai" || n.Attrs["llm_model"].Origin != pipeline.OriginExplicit) {
			t.Errorf("critical_review: %+v", n)
		}
	}
}

// TestPipelineCheckJSONSyntaxError: a flow that does not parse gives one
// diagnostic and no graph, exit 1.
func TestPipelineCheckJSONSyntaxError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "bad.dot")
	if err := os.WriteFile(file, []byte("digraph G {\n a -- b\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := checkJSON(t, file)
	var rep struct {
		OK          bool
		Diagnostics []struct {
			Rule, Severity string
			Line, Col      int
		}
		Graph *json.RawMessage
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatal(err)
	}
	if code != 1 || rep.OK || len(rep.Diagnostics) != 1 || rep.Diagnostics[0].Rule != "syntax" || rep.Diagnostics[0].Line != 2 || rep.Diagnostics[0].Col != 4 || rep.Graph != nil {
		t.Errorf("exit %d: %s", code, out)
	}
}
