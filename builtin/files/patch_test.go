package files

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const goFile = `package stats

// Mean returns the mean.
func Mean(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs)-1)
}

// Max returns the largest value.
func Max(xs []float64) float64 {
	m := xs[0]
	for _, x := range xs {
		if x > m {
			m = x
		}
	}
	return m
}
`

func read(t *testing.T, w *Workspace, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(w.Dir(), name))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

func TestApplyPatch(t *testing.T) {
	for _, tc := range []struct {
		name, patch string
		want        map[string]string // file -> content ("" means absent)
		err         string
	}{
		{name: "update with context and hint", patch: `*** Begin Patch
*** Update File: stats.go
@@ func Mean(xs []float64) float64 {
 	for _, x := range xs {
 		sum += x
 	}
-	return sum / float64(len(xs)-1)
+	return sum / float64(len(xs))
 }
*** End Patch`, want: map[string]string{"stats.go": strings.Replace(goFile, "len(xs)-1", "len(xs)", 1)}},
		{name: "two hunks, add and delete files", patch: `*** Begin Patch
*** Update File: stats.go
@@
-// Mean returns the mean.
+// Mean returns the arithmetic mean.
@@ func Max
-	m := xs[0]
+	m := xs[0] // xs is not empty
*** Add File: notes/todo.txt
+one
+two
*** Delete File: old.txt
*** End Patch`, want: map[string]string{
			"stats.go":       strings.Replace(strings.Replace(goFile, "the mean.", "the arithmetic mean.", 1), "m := xs[0]", "m := xs[0] // xs is not empty", 1),
			"notes/todo.txt": "one\ntwo\n", "old.txt": ""}},
		{name: "move", patch: "*** Begin Patch\n*** Update File: old.txt\n*** Move to: new/name.txt\n@@\n-bye\n+hello\n*** End Patch\n",
			want: map[string]string{"old.txt": "", "new/name.txt": "hello\n"}},
		{name: "typographic quotes and trailing spaces", patch: "```\napply_patch <<'EOF'\n*** Begin Patch\n*** Update File: quote.txt\n@@\n-He said \u201chi\u201d   \n+He said \"hello\"\n*** End of File\n*** End Patch\nEOF\n```",
			want: map[string]string{"quote.txt": "first\nHe said \"hello\"\n"}},
		{name: "a hunk that does not apply changes nothing", patch: `*** Begin Patch
*** Add File: created.txt
+x
*** Update File: stats.go
@@
 	sum := 0.0
-	for i := range xs {
+	for i := range len(xs) {
*** End Patch`, want: map[string]string{"created.txt": "", "stats.go": goFile},
			err: "*** Update File: stats.go: hunk 1 (patch line 5) does not apply: these lines were not found in order:\n  \tsum := 0.0\n  \tfor i := range xs {\nThe nearest lines of stats.go (1 of 2 lines match):\n     4| func Mean(xs []float64) float64 {\n     5| \tsum := 0.0\n     6| \tfor _, x := range xs {\n     7| \t\tsum += x\nNothing was changed"},
		{name: "add over an existing file", patch: "*** Begin Patch\n*** Add File: old.txt\n+x\n*** End Patch", err: "*** Add File: old.txt: the file exists already"},
		{name: "escape", patch: "*** Begin Patch\n*** Add File: ../outside.txt\n+x\n*** End Patch", err: "outside the workspace"},
		{name: "absolute escape", patch: "*** Begin Patch\n*** Update File: /etc/hostname\n@@\n-x\n+y\n*** End Patch", err: "outside the workspace"},
		{name: "no end", patch: "*** Begin Patch\n*** Add File: a.txt\n+x\n", err: `the patch has no "*** End Patch" line`},
		{name: "not a patch", patch: "diff --git a/x b/x\n", err: `patch line 1: a patch starts with "*** Begin Patch"`},
		{name: "bad hunk line", patch: "*** Begin Patch\n*** Update File: old.txt\n@@\n*bye\n*** End Patch", err: `patch line 4: a hunk line starts with a space, - or +, not "*bye"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := workspace(t, map[string]string{"stats.go": goFile, "old.txt": "bye\n", "quote.txt": "first\nHe said \u201chi\u201d\n"})
			out, err := run(t, ApplyPatch(w), map[string]any{"input": tc.patch})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
			} else if err != nil {
				t.Fatal(err)
			} else if !strings.HasPrefix(out, "Done. The patch changed:") {
				t.Errorf("answer %q", out)
			}
			for name, want := range tc.want {
				got := read(t, w, name)
				if want == "" {
					if !strings.HasPrefix(got, "<") {
						t.Errorf("%s exists: %q", name, got)
					}
				} else if got != want {
					t.Errorf("%s:\n%s\nwant:\n%s", name, got, want)
				}
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(w.Dir()), "outside.txt")); err == nil {
				t.Fatal("a patch wrote outside the workspace")
			}
		})
	}
}

func TestEditShapes(t *testing.T) {
	w := workspace(t, map[string]string{"a.txt": "x y x y x\n"})
	if _, err := run(t, ProfileAnthropic.EditTool(w), map[string]any{"path": "a.txt", "old_string": "y", "new_string": "Y", "replace_all": true}); err != nil {
		t.Fatal(err)
	}
	_, err := run(t, ProfileGemini.EditTool(w), map[string]any{"path": "a.txt", "old_string": "x", "new_string": "z"})
	if err == nil || !strings.Contains(err.Error(), "old_string occurs 3 times in a.txt, but expected_replacements is 1") {
		t.Fatalf("gemini with one expected: %v", err)
	}
	if _, err := run(t, ProfileGemini.EditTool(w), map[string]any{"path": "a.txt", "old_string": "x", "new_string": "z", "expected_replacements": 3}); err != nil {
		t.Fatal(err)
	}
	if got := read(t, w, "a.txt"); got != "z Y z Y z\n" {
		t.Errorf("a.txt = %q", got)
	}
	for p, want := range map[Profile]string{ProfileOpenAI: "apply_patch", ProfileAnthropic: "edit_file", ProfileGemini: "replace", ProfileNanobot: "edit_file"} {
		spec := p.EditTool(w).Spec()
		if spec.Name != want {
			t.Errorf("%s: %s", p, spec.Name)
		}
	}
	if _, ok := ProfileAnthropic.EditTool(w).Spec().Parameters["properties"].(map[string]any)["old_string"]; !ok {
		t.Error("anthropic's edit_file has no old_string")
	}
	if _, ok := ProfileNanobot.EditTool(w).Spec().Parameters["properties"].(map[string]any)["old_text"]; !ok {
		t.Error("nanobot's edit_file has no old_text")
	}
}

func TestProfileFor(t *testing.T) {
	for _, tc := range []struct {
		provider, model string
		want            Profile
	}{
		{"openai", "gpt-5.1", ProfileOpenAI}, {"openai", "o4-mini", ProfileOpenAI}, {"openai", "gpt-5.1-codex", ProfileOpenAI},
		{"openai", "openai/gpt-4o", ProfileOpenAI}, {"openai", "llama3.1:8b", ProfileNanobot}, {"openai", "anthropic/claude-sonnet-4.5", ProfileAnthropic},
		{"anthropic", "claude-opus-4-5", ProfileAnthropic}, {"google", "gemini-2.5-pro", ProfileGemini},
		{"ollama", "qwen3", ProfileNanobot}, {"mistral", "mistral-large-latest", ProfileNanobot}, {"ollama", "o", ProfileNanobot},
	} {
		if got := ProfileFor(tc.provider, tc.model); got != tc.want {
			t.Errorf("%s %s: %s, want %s", tc.provider, tc.model, got, tc.want)
		}
	}
}
