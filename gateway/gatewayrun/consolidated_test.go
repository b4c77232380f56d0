package gatewayrun

import (
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"testing"

	gwsession "github.com/nbots/nb/gateway/session"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/state"
)

// The messages memory reads from a session: every event in order, the
// AI's as "assistant", non-text contents as JSON, tool names listed; read
// from an index on, the same messages from there.
func TestConsolidatedSessionMessages(t *testing.T) {
	sm, err := gwsession.NewManager(filepath.Join(t.TempDir(), "sessions"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sm.Close() })
	s, err := sm.Get(t.Context(), "telegram:1")
	if err != nil {
		t.Fatal(err)
	}
	err = s.Append(t.Context(),
		state.Event{Who: state.RoleUser, Message: "hi"},
		state.Event{Who: state.RoleAI, Message: map[string]any{"k": "v"}, ToolCalls: []state.ToolCall{{Name: "exec"}}},
		state.Event{Who: state.RoleUser, Message: "more"},
	)
	if err != nil {
		t.Fatal(err)
	}
	all := consolidatedSession{s}.messages(0)
	if len(all) != 3 || all[0].Content != "hi" || all[1].Role != "assistant" || all[1].Content != `{"k":"v"}` ||
		!reflect.DeepEqual(all[1].Tools, []string{"exec"}) || all[2].Content != "more" {
		t.Fatalf("messages: %+v", all)
	}
	for from, want := range map[int][]string{1: {`{"k":"v"}`, "more"}, 2: {"more"}, 3: nil, 9: nil} {
		var got []string
		for _, m := range (consolidatedSession{s}).messages(from) {
			got = append(got, m.Content)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("messages(%d) = %q, want %q", from, got, want)
		}
	}
}

// The history a turn sends is bounded by the message window the
// consolidation counts by (agents.defaults.memoryWindow, default 100), and
// by nothing when memoryWindow is ignored beside contextWindowTokens in a
// nanobot configuration (see config.Config's memoryWindow).
func TestHistoryBoundedByTheMessageWindow(t *testing.T) {
	model := httptest.NewServer(openaitest.New(echo))
	defer model.Close()
	for _, c := range []struct {
		window, want int
	}{{0, 100}, {40, 40}, {-1, 0}} {
		cfg := testConfig(t, model.URL, nil)
		cfg.Agents.Defaults.MemoryWindow = c.window
		gw, err := Open(t.Context(), cfg, testOptions(t))
		if err != nil {
			t.Fatal(err)
		}
		if got := gw.Core.HistoryMessages; got != c.want {
			t.Errorf("memoryWindow %d: a turn's history holds at most %d messages, want %d", c.window, got, c.want)
		}
		gw.Close()
	}
}
