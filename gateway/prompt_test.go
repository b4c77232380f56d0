package gateway

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
)

// longMemory is a Memory seam that gives whatever it holds.
type longMemory string

func (m longMemory) LongTerm() string { return string(m) }

// A 50 MB MEMORY.md (or one written by a prompt-injected exec) was sent
// whole in every request: the prompt now takes the beginning of the
// memory and of each bootstrap file, says so, and warns once per size
// in the log, naming the file and its size.
func TestPromptBoundsHugeFiles(t *testing.T) {
	dir := t.TempDir()
	var logs bytes.Buffer
	p := &Prompt{Workspace: dir, Log: slog.New(slog.NewTextHandler(&logs, nil))}
	writeFile(t, filepath.Join(dir, "memory", "MEMORY.md"), "remember this\n"+strings.Repeat("m", 5<<20))
	writeFile(t, filepath.Join(dir, "AGENTS.md"), "be kind\n"+strings.Repeat("a", 1<<20))
	writeFile(t, filepath.Join(dir, "SOUL.md"), "small soul")
	var out string
	for range 3 {
		out = p.Build("web", "1")
	}
	if n := len(out); n > DefaultMaxMemoryBytes+DefaultMaxFileBytes+4096 {
		t.Fatalf("a system prompt of %d bytes", n)
	}
	for _, want := range []string{"remember this", "be kind", "small soul", "[MEMORY.md is 5242894 bytes: only its first 65536 are shown]", "[AGENTS.md is 1048584 bytes: only its first 32768 are shown]"} {
		if !strings.Contains(out, want) {
			t.Errorf("the prompt lacks %q", want)
		}
	}
	l := logs.String()
	if strings.Count(l, "level=WARN") != 2 || !strings.Contains(l, filepath.Join(dir, "memory", "MEMORY.md")) || !strings.Contains(l, "bytes=5242894") ||
		!strings.Contains(l, filepath.Join(dir, "AGENTS.md")) || !strings.Contains(l, "bytes=1048584") {
		t.Errorf("warnings:\n%s", l)
	}
	// Through the memory seam too, with the limits set lower.
	logs.Reset()
	p = &Prompt{Workspace: dir, Memory: longMemory(strings.Repeat("z", 10_000)), MaxMemoryBytes: 1000, MaxFileBytes: 100, Log: slog.New(slog.NewTextHandler(&logs, nil))}
	out = p.Build("web", "1")
	if strings.Count(out, "z") > 1000 || !strings.Contains(out, "[MEMORY.md is 10000 bytes: only its first 1000 are shown]") || strings.Count(out, "a") > 200 {
		t.Errorf("prompt of %d bytes: %s", len(out), out[len(out)-300:])
	}
	if !strings.Contains(logs.String(), "bytes=10000") {
		t.Errorf("warnings:\n%s", logs.String())
	}
}
