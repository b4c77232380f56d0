package files

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nbots/nb/tool"
)

// TestPolicy: a call's policy hides the gateway's control files from
// every file tool, keeps the files that shape the prompt read-only, and
// reports the writes to the watched ones; a symbolic link inside the
// workspace to a hidden folder is the folder.
func TestPolicy(t *testing.T) {
	w := workspace(t, map[string]string{
		"sessions/telegram_1.jsonl": "the owner's secret conversation\n",
		"cron/jobs.json":            `{"jobs":[]}` + "\n",
		"media/photo.txt":           "owner's media secret\n",
		"media/mine.txt":            "the guest's own file\n",
		"AGENTS.md":                 "be kind\n",
		"skills/x/SKILL.md":         "a skill\n",
		"notes.md":                  "free notes secret\n",
		"memory/.lock":              "lock secret\n",
		"memory/MEMORY.md":          "memory\n",
	})
	if err := os.Symlink("sessions", filepath.Join(w.Dir(), "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("memory", filepath.Join(w.Dir(), "memlink")); err != nil {
		t.Fatal(err)
	}
	dir := w.Dir()
	var mu sync.Mutex
	var announced []string
	p := &Policy{
		Hidden:   []string{filepath.Join(dir, "sessions"), filepath.Join(dir, "cron"), filepath.Join(dir, "media"), filepath.Join(dir, "memory", ".lock")},
		Visible:  []string{filepath.Join(dir, "media", "mine.txt")},
		ReadOnly: []string{filepath.Join(dir, "AGENTS.md")},
		Watched:  []string{filepath.Join(dir, "skills")},
		OnWrite: func(p string) {
			mu.Lock()
			announced = append(announced, p)
			mu.Unlock()
		},
	}
	ctx := WithPolicy(context.Background(), p)
	tools := map[string]tool.Tool{}
	for _, tl := range append(Tools(w, true, ProfileNanobot), ApplyPatch(w)) {
		tools[tl.Spec().Name] = tl
	}
	call := func(name string, args map[string]any) (string, error) {
		out, err := tools[name].Run(ctx, tool.Call{Name: name, Arguments: args})
		s, _ := out.(string)
		return s, err
	}
	for _, tc := range []struct {
		name, tool string
		args       map[string]any
		refused    string // a word of the error; "" when it runs
		leaks      string // text that must not show in the answer
	}{
		{"read a session", "read_file", map[string]any{"path": "sessions/telegram_1.jsonl"}, "not reachable", ""},
		{"read a session by its absolute path", "read_file", map[string]any{"path": filepath.Join(dir, "sessions/telegram_1.jsonl")}, "not reachable", ""},
		{"read a session by another case", "read_file", map[string]any{"path": "SESSIONS/telegram_1.jsonl"}, "not reachable", ""},
		{"read a session through a link", "read_file", map[string]any{"path": "link/telegram_1.jsonl"}, "not reachable", ""},
		{"read a session through ..", "read_file", map[string]any{"path": "skills/../sessions/telegram_1.jsonl"}, "not reachable", ""},
		{"read another chat's media", "read_file", map[string]any{"path": "media/photo.txt"}, "not reachable", ""},
		{"read the turn's own media", "read_file", map[string]any{"path": "media/mine.txt"}, "", ""},
		{"write the cron jobs", "write_file", map[string]any{"path": "cron/jobs.json", "content": "{}"}, "not reachable", ""},
		{"write the turn's own media", "write_file", map[string]any{"path": "media/mine.txt", "content": "x"}, "not reachable", ""},
		{"create a session", "write_file", map[string]any{"path": "sessions/new.jsonl", "content": "{}"}, "not reachable", ""},
		{"edit the cron jobs", "edit_file", map[string]any{"path": "cron/jobs.json", "old_text": "[]", "new_text": "[1]"}, "not reachable", ""},
		{"patch a session", "apply_patch", map[string]any{"input": "*** Begin Patch\n*** Delete File: sessions/telegram_1.jsonl\n*** End Patch"}, "not reachable", ""},
		{"move a file over the cron jobs", "apply_patch", map[string]any{"input": "*** Begin Patch\n*** Update File: notes.md\n*** Move to: cron/jobs.json\n@@\n-free notes secret\n+x\n*** End Patch"}, "not reachable", ""},
		{"list the sessions", "list_dir", map[string]any{"path": "sessions"}, "not reachable", ""},
		{"list the workspace", "list_dir", map[string]any{}, "", "sessions/"},
		{"list the media", "list_dir", map[string]any{"path": "link"}, "not reachable", ""},
		{"glob everything", "glob", map[string]any{"pattern": "**/*"}, "", "telegram_1"},
		{"grep everything", "grep", map[string]any{"pattern": "secret"}, "", "owner's secret"},
		{"grep the media", "grep", map[string]any{"pattern": "secret", "path": "media"}, "not reachable", ""},
		{"grep a folder holding a hidden file", "grep", map[string]any{"pattern": "secret", "path": "memory"}, "", "lock secret"},
		{"grep through a link to it", "grep", map[string]any{"pattern": "secret", "path": "memlink"}, "", "lock secret"},
		{"list through a link to it", "list_dir", map[string]any{"path": "memlink"}, "", ".lock"},
		{"read the hidden file through the link", "read_file", map[string]any{"path": "memlink/.lock"}, "not reachable", ""},
		{"grep a session file", "grep", map[string]any{"pattern": "secret", "path": "sessions/telegram_1.jsonl"}, "not reachable", ""},
		{"write a bootstrap file", "write_file", map[string]any{"path": "AGENTS.md", "content": "obey me"}, "read-only", ""},
		{"write a bootstrap file by another case", "write_file", map[string]any{"path": "agents.md", "content": "obey me"}, "read-only", ""},
		{"edit a bootstrap file", "edit_file", map[string]any{"path": "AGENTS.md", "old_text": "kind", "new_text": "mean"}, "read-only", ""},
		{"read a bootstrap file", "read_file", map[string]any{"path": "AGENTS.md"}, "", ""},
		{"write free notes", "write_file", map[string]any{"path": "notes2.md", "content": "hello"}, "", ""},
		{"write a skill (watched)", "write_file", map[string]any{"path": "skills/x/SKILL.md", "content": "always: true"}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := call(tc.tool, tc.args)
			switch {
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), tc.refused)):
				t.Fatalf("%s %v: answer %q, error %v; want refused (%s)", tc.tool, tc.args, out, err, tc.refused)
			case tc.refused == "" && err != nil:
				t.Fatalf("%s %v: %v", tc.tool, tc.args, err)
			case tc.leaks != "" && strings.Contains(out, tc.leaks):
				t.Fatalf("%s shows %q:\n%s", tc.tool, tc.leaks, out)
			}
		})
	}
	for _, f := range []string{"sessions/telegram_1.jsonl", "cron/jobs.json", "AGENTS.md"} {
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil || strings.Contains(string(data), "obey") || strings.Contains(string(data), "[1]") || string(data) == "{}" {
			t.Errorf("%s changed: %q, %v", f, data, err)
		}
	}
	if len(announced) != 1 || announced[0] != filepath.Join(dir, "skills", "x", "SKILL.md") {
		t.Fatalf("announced %v, want the skill alone", announced)
	}
	// Without a policy, the tools reach everything in the workspace.
	if out := mustRun(t, ReadFile(w), map[string]any{"path": "sessions/telegram_1.jsonl"}); !strings.Contains(out, "secret") {
		t.Fatal(out)
	}
}

// TestUnder: an entry covers itself and what lies below it, in any case,
// and nothing that merely starts with its name.
func TestUnder(t *testing.T) {
	for _, tc := range []struct {
		path, entry string
		want        bool
	}{
		{"/w/sessions", "/w/sessions", true},
		{"/w/sessions/a.jsonl", "/w/sessions", true},
		{"/w/SESSIONS/a.jsonl", "/w/sessions", true},
		{"/w/sessions2/a.jsonl", "/w/sessions", false},
		{"/w/session", "/w/sessions", false},
		{"/w/sessions/../notes.md", "/w/sessions", false},
		{"/w/x/", "/w/x", true},
		{"/w/y", "/w/x/", false},
	} {
		if got := under(tc.path, tc.entry); got != tc.want {
			t.Errorf("under(%q, %q) = %v, want %v", tc.path, tc.entry, got, tc.want)
		}
	}
}
