package heartbeat

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nbots/nb/gateway/modelcall"
	"github.com/nbots/nb/provider"
)

// TestDecision: a beat with unchecked tasks first asks the model, as
// nanobot's phase 1, through the heartbeat tool: skip (or no call, as an
// echo answers) runs nothing; run runs the tasks as the model summed
// them up; a failed call runs nothing and is an error.
func TestDecision(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "HEARTBEAT.md"), []byte("## Active Tasks\n\n- [ ] Check the plants\n"), 0o600)
	for _, tc := range []struct {
		name    string
		reply   modelcall.Reply
		err     error
		run     bool
		prompt  string
		wantErr bool
	}{
		{"skip", modelcall.Reply{ToolCalls: []provider.ToolCall{{Name: "heartbeat", Arguments: `{"action": "skip"}`}}}, nil, false, "", false},
		{"echo", modelcall.Reply{Content: "echo: Current Time: ..."}, nil, false, "", false},
		{"run", modelcall.Reply{ToolCalls: []provider.ToolCall{{Name: "heartbeat", Arguments: `{"action": "run", "tasks": "Water the basil"}`}}}, nil, true, "Water the basil", false},
		{"run as written", modelcall.Reply{ToolCalls: []provider.ToolCall{{Name: "heartbeat", Arguments: `{"action": "run"}`}}}, nil, true, "- [ ] Check the plants", false},
		{"failed", modelcall.Reply{}, errors.New("503"), false, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked modelcall.Request
			var ran []string
			s := &Service{Workspace: dir,
				Decide: modelcall.Func(func(_ context.Context, r modelcall.Request) (modelcall.Reply, error) {
					asked = r
					return tc.reply, tc.err
				}),
				Execute: func(_ context.Context, p string) error { ran = append(ran, p); return nil },
			}
			did, err := s.Beat(context.Background())
			if (err != nil) != tc.wantErr || did != tc.run || len(ran) != map[bool]int{true: 1}[tc.run] {
				t.Fatalf("beat: did %v, err %v, ran %q", did, err, ran)
			}
			if tc.run && (!strings.HasPrefix(ran[0], "[Heartbeat] Current Time: ") || !strings.HasSuffix(ran[0], "\n\n"+tc.prompt)) {
				t.Errorf("prompt %q, want the tasks %q", ran[0], tc.prompt)
			}
			if asked.System != "You are a heartbeat agent. Call the heartbeat tool to report your decision." ||
				!strings.HasPrefix(asked.User, "Current Time: ") ||
				!strings.Contains(asked.User, "\n\nReview the following HEARTBEAT.md and decide whether there are active tasks.\n\n## Active Tasks\n\n- [ ] Check the plants") ||
				len(asked.Tools) != 1 || asked.Tools[0].Name != "heartbeat" {
				t.Errorf("decision request %+v", asked)
			}
		})
	}
	// No unchecked task: no call at all.
	os.WriteFile(filepath.Join(dir, "HEARTBEAT.md"), []byte(Template), 0o600)
	s := &Service{Workspace: dir, Decide: modelcall.Func(func(context.Context, modelcall.Request) (modelcall.Reply, error) {
		t.Fatal("asked with nothing to do")
		return modelcall.Reply{}, nil
	}), Execute: func(context.Context, string) error { t.Fatal("ran"); return nil }}
	if did, err := s.Beat(context.Background()); did || err != nil {
		t.Fatal(did, err)
	}
}
