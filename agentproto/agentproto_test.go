package agentproto

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
)

// docs/agent-protocol.md holds every schema file verbatim.
func TestSchemasInDocument(t *testing.T) {
	doc, err := os.ReadFile("../docs/agent-protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range SchemaFiles() {
		text, _ := SchemaText(name)
		block := "```json\n" + strings.TrimRight(string(text), "\n") + "\n```"
		if !strings.Contains(string(doc), block) {
			t.Errorf("docs/agent-protocol.md does not hold %s as it is", name)
		}
	}
	// The document's AgentRepr example follows the schema.
	start := strings.Index(string(doc), "```json\n{\"name\":\"Writer\"")
	end := strings.Index(string(doc)[start+8:], "```")
	var v any
	if err := json.Unmarshal([]byte(string(doc)[start+8:start+8+end]), &v); err != nil {
		t.Fatal(err)
	}
	if err := Validate("agents", []any{v}); err != nil {
		t.Errorf("the AgentRepr example: %v", err)
	}
}

// Frames as the code writes them follow their schemas; broken ones do
// not, with a message that names the field.
func TestFrameSchemas(t *testing.T) {
	good := []*Frame{
		{Type: TypeRun, Seq: 1, Input: "hi", Tools: []ToolRepr{{Name: "t"}}, Minions: []MinionRef{{AgentRepr: AgentRepr{Name: "m"}, URL: "wss://h/agents/m/run"}}, Chain: []Hop{{Server: "s"}}},
		{Type: TypeRunStarted, Seq: 1, RunID: "r", Agent: "a"},
		{Type: TypeStepChunk, Seq: 2, RunID: "r", Step: 1, Delta: "a"},
		{Type: TypeStep, Seq: 3, RunID: "r", Step: 1, Generated: Text(""), Usage: &Usage{}},
		{Type: TypeStep, Seq: 3, RunID: "r", MinionID: "m1/m2", Step: 1, Generated: Text("x"), Usage: &Usage{}, ToolCalls: []ToolCall{{ID: "c", Name: "n", Input: map[string]any{}}}},
		{Type: TypeToolCall, Seq: 4, RunID: "r", ID: "c", Name: "n", Input: map[string]any{}},
		{Type: TypeToolResult, Seq: 2, ID: "c", Output: false},
		{Type: TypeConfirm, Seq: 4, RunID: "r", ID: "c", Name: "n", Input: map[string]any{"a": 1}},
		{Type: TypeConfirmResult, Seq: 3, ID: "c", Allow: Bool(false)},
		{Type: TypeMinionStart, Seq: 5, RunID: "r", MinionID: "m1", Name: "M", Input: "x"},
		{Type: TypeMinionResult, Seq: 6, RunID: "r", MinionID: "m1", Result: "y", Usage: &Usage{}},
		{Type: TypeInput, Seq: 4, Content: "be brief"},
		{Type: TypeStop, Seq: 5},
		{Type: TypeFinalResult, Seq: 7, RunID: "r", Result: map[string]any{"n": 1}, Usage: &Usage{InputTokens: 1}},
		{Type: TypeError, Seq: 8, Code: CodeCancelled, Message: "stopped"},
	}
	for _, f := range good {
		data, _ := json.Marshal(f)
		if err := ValidateFrame(data); err != nil {
			t.Errorf("%s: %v", data, err)
		}
	}
	bad := []struct{ frame, want string }{
		{`{"type":"run"}`, `required: missing properties: ["seq"]`},
		{`{"type":"step","seq":1,"run_id":"r","step":1,"generated":"","usage":{"input_tokens":1,"output_tokens":1}}`, `missing properties: ["tool_calls"]`},
		{`{"type":"confirm_result","seq":1,"id":"c","allow":"yes"}`, "allow: must be a boolean, not a string"},
		{`{"type":"step_chunk","seq":1,"run_id":"r","minion_id":"x","step":1,"delta":"a"}`, "minion_id: pattern"},
		{`{"type":"step_chunk","seq":1,"run_id":"r","step":1,"delta":""}`, "delta: minLength"},
		{`{"type":"error","seq":1,"code":"oops","message":"m"}`, "code: must be one of [validation_error"},
		{`{"type":"dance","seq":1}`, `unknown frame type "dance"`},
		{`[1]`, "a frame is a JSON object"},
	}
	for _, tc := range bad {
		err := ValidateFrame([]byte(tc.frame))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.frame, err, tc.want)
		}
	}
}

func TestParseAgentURL(t *testing.T) {
	for _, tc := range []struct{ in, server, name string }{
		{"http://h:8080/Writer", "http://h:8080", "Writer"},
		{"https://h/nb/Writer", "https://h/nb", "Writer"},
		{"ws://h:1/agents/Web%20Researcher/run", "http://h:1", "Web Researcher"},
		{"wss://h/prefix/agents/W/run", "https://h/prefix", "W"},
		{"http://h/agents/W", "http://h", "W"},
	} {
		s, n, err := ParseAgentURL(tc.in)
		if err != nil || s != tc.server || n != tc.name {
			t.Errorf("%s: %q %q %v", tc.in, s, n, err)
		}
	}
	for _, bad := range []string{"h/W", "http://h", "http://h/", "ftp://h/W"} {
		if _, _, err := ParseAgentURL(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	c, _ := NewClient("https://h/nb/", "")
	if got := c.RunURL("Web Researcher"); got != "wss://h/nb/agents/Web%20Researcher/run" {
		t.Errorf("RunURL %s", got)
	}
}

// A client's token goes to its server only: a redirect to another host
// is not followed.
func TestTokenStaysWithItsServer(t *testing.T) {
	var leaked atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			leaked.Store(true)
		}
		w.Write([]byte("[]")) //nolint:errcheck // test
	}))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusFound)
	}))
	defer srv.Close()
	c, _ := NewClient(srv.URL, "secret")
	_, err := c.Agents(context.Background())
	var he *HTTPError
	if !errors.As(err, &he) || he.Status != http.StatusFound {
		t.Errorf("err = %v, want the redirect as an error", err)
	}
	if leaked.Load() {
		t.Error("the token went to another host")
	}
}
