package engine

import (
	"os"
	"path/filepath"
	"testing"
)

// TestJournal: each save is a journal line and checkpoint.json;
// LoadCheckpoint takes the journal's last line when it is newer than
// checkpoint.json (a process killed between the two writes) or when
// checkpoint.json is empty or missing (a power cut), skips a cut last
// line, and refuses a checkpoint.json someone damaged; past journalMax
// the journal is compacted into a durable checkpoint.json.
func TestJournal(t *testing.T) {
	dir := t.TempDir()
	j := &journal{dir: dir}
	defer j.close()
	cp := func(node string, saves int) []byte {
		c := &Checkpoint{CurrentNode: node, GraphHash: "h", CompletedNodes: []string{}, Saves: saves}
		data, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	load := func() string {
		t.Helper()
		c, err := LoadCheckpoint(dir)
		if err != nil {
			t.Fatal(err)
		}
		return c.CurrentNode
	}
	for i, n := range []string{"a", "b", "c"} {
		if err := j.save(cp(n, i+1)); err != nil {
			t.Fatal(err)
		}
	}
	if got := load(); got != "c" {
		t.Errorf("after three saves: %s", got)
	}
	// Killed after the journal line, before checkpoint.json: b there.
	os.WriteFile(filepath.Join(dir, CheckpointFile), cp("b", 2), 0o644)
	if got := load(); got != "c" {
		t.Errorf("journal newer: %s, want c", got)
	}
	os.WriteFile(filepath.Join(dir, CheckpointFile), nil, 0o644)
	if got := load(); got != "c" {
		t.Errorf("empty checkpoint.json: %s, want c", got)
	}
	os.Remove(filepath.Join(dir, CheckpointFile))
	if got := load(); got != "c" {
		t.Errorf("no checkpoint.json: %s, want c", got)
	}
	// A line cut by a power cut: the one before it.
	f, _ := os.OpenFile(filepath.Join(dir, JournalFile), os.O_WRONLY|os.O_APPEND, 0)
	f.Write(cp("d", 4)[:20])
	f.Close()
	if got := load(); got != "c" {
		t.Errorf("cut line: %s, want c", got)
	}
	// The next writer ends the cut line first.
	j.close()
	j = &journal{dir: dir}
	if err := j.save(cp("e", 5)); err != nil {
		t.Fatal(err)
	}
	if got := load(); got != "e" {
		t.Errorf("after a cut line: %s, want e", got)
	}
	os.WriteFile(filepath.Join(dir, CheckpointFile), []byte(`{"current_node": `), 0o644)
	if _, err := LoadCheckpoint(dir); err == nil {
		t.Error("a damaged checkpoint.json was taken")
	}
	// Compaction.
	old := journalMax
	journalMax = 1
	defer func() { journalMax = old }()
	if err := j.save(cp("f", 6)); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(dir, JournalFile)); err != nil || st.Size() != 0 {
		t.Errorf("journal not compacted: %v %v", st, err)
	}
	if got := load(); got != "f" {
		t.Errorf("after compaction: %s, want f", got)
	}
}
