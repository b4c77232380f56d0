package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/nbots/nb/internal/atomicfile"
)

// ArtifactThreshold is §5.5's file-backing threshold: an artifact larger
// than this (its JSON, in bytes) is written to
// {logs_root}/artifacts/{id}.json; a smaller one is kept in memory.
const ArtifactThreshold = 100 * 1024

// ArtifactInfo describes a stored artifact (§5.5).
type ArtifactInfo struct {
	ID         string    `json:"id"`
	Name       string    `json:"name"`
	SizeBytes  int       `json:"size_bytes"`
	StoredAt   time.Time `json:"stored_at"`
	FileBacked bool      `json:"is_file_backed"`
}

// ErrNoArtifact says no artifact has the id ("Artifact not found").
var ErrNoArtifact = errors.New("artifact not found")

// Artifacts is §5.5's artifact store: named, typed storage for a run's
// large stage outputs, which do not belong in the context (the context
// holds small values for routing and the checkpoint; a handler stores a
// large output here and puts its id in its context_updates). An
// artifact's data is kept as JSON: over ArtifactThreshold bytes it is
// written to {base_dir}/artifacts/{id}.json (atomically) and read from
// there, below it it is held in memory, and also in the checkpoint (nb: so that a
// resumed run still has it). Store replaces an artifact of the same id.
// It is safe for concurrent use (parallel branches share it).
type Artifacts struct {
	mu    sync.RWMutex
	dir   string // base_dir; "" keeps everything in memory
	items map[string]*ArtifactEntry
	order []string
}

// ArtifactEntry is an artifact as the checkpoint keeps it: its info,
// and its data when it is held in memory.
type ArtifactEntry struct {
	Info ArtifactInfo    `json:"info"`
	Data json.RawMessage `json:"data,omitempty"`
}

// NewArtifacts returns an empty store whose file-backed artifacts go to
// baseDir/artifacts ("" keeps every artifact in memory, as §5.5's
// base_dir NONE).
func NewArtifacts(baseDir string) *Artifacts {
	return &Artifacts{dir: baseDir, items: map[string]*ArtifactEntry{}}
}

var artifactID = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`) })

// Store keeps data (any value JSON can write) under id; name says what
// it is. The id names the file of a file-backed artifact, so it is a
// word of letters, digits, `_`, `.` and `-` (128 at most, not starting
// with `.` or `-`).
func (a *Artifacts) Store(id, name string, data any) (ArtifactInfo, error) {
	if !artifactID().MatchString(id) || id == "." || id == ".." {
		return ArtifactInfo{}, fmt.Errorf("artifact id %q: use letters, digits, _, . and - (128 at most, starting with a letter, a digit or _)", id)
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return ArtifactInfo{}, fmt.Errorf("artifact %s: %w", id, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	info := ArtifactInfo{ID: id, Name: name, SizeBytes: len(raw), StoredAt: time.Now().UTC(), FileBacked: len(raw) > ArtifactThreshold && a.dir != ""}
	it := &ArtifactEntry{Info: info}
	path := a.path(id)
	if info.FileBacked {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return ArtifactInfo{}, fmt.Errorf("artifact %s: %w", id, err)
		}
		if err := atomicfile.WriteFile(path, raw, 0o644); err != nil {
			return ArtifactInfo{}, fmt.Errorf("artifact %s: %w", id, err)
		}
	} else {
		it.Data = raw
		if old := a.items[id]; old != nil && old.Info.FileBacked {
			os.Remove(path) //nolint:errcheck // replaced by one in memory
		}
	}
	if _, ok := a.items[id]; !ok {
		a.order = append(a.order, id)
	}
	a.items[id] = it
	return info, nil
}

func (a *Artifacts) path(id string) string { return filepath.Join(a.dir, "artifacts", id+".json") }

// Retrieve returns the artifact's data as JSON.
func (a *Artifacts) Retrieve(id string) (json.RawMessage, error) {
	a.mu.RLock()
	it := a.items[id]
	a.mu.RUnlock()
	if it == nil {
		return nil, fmt.Errorf("artifact %q: %w", id, ErrNoArtifact)
	}
	if !it.Info.FileBacked {
		return it.Data, nil
	}
	data, err := os.ReadFile(a.path(id))
	if err != nil {
		return nil, fmt.Errorf("artifact %s: %w", id, err)
	}
	return data, nil
}

// Decode reads the artifact's data into v (json.Unmarshal's).
func (a *Artifacts) Decode(id string, v any) error {
	data, err := a.Retrieve(id)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("artifact %s: %w", id, err)
	}
	return nil
}

// Has reports whether an artifact has the id.
func (a *Artifacts) Has(id string) bool {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.items[id] != nil
}

// List describes the artifacts, in the order they were first stored.
func (a *Artifacts) List() []ArtifactInfo {
	a.mu.RLock()
	defer a.mu.RUnlock()
	out := make([]ArtifactInfo, 0, len(a.order))
	for _, id := range a.order {
		out = append(out, a.items[id].Info)
	}
	return out
}

// Remove forgets the artifact (and removes its file).
func (a *Artifacts) Remove(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.remove(id)
}

func (a *Artifacts) remove(id string) {
	it := a.items[id]
	if it == nil {
		return
	}
	if it.Info.FileBacked {
		os.Remove(a.path(id)) //nolint:errcheck // forgotten anyway
	}
	delete(a.items, id)
	a.order = slices.DeleteFunc(a.order, func(s string) bool { return s == id })
}

// Clear forgets every artifact.
func (a *Artifacts) Clear() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range slices.Clone(a.order) {
		a.remove(id)
	}
}

// Len is the number of artifacts (PipelineCompleted's artifact_count).
func (a *Artifacts) Len() int {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return len(a.order)
}

// snapshot is the store as the checkpoint keeps it: every artifact's
// info, with the data of those in memory. nil when there is none.
func (a *Artifacts) snapshot() []*ArtifactEntry {
	a.mu.RLock()
	defer a.mu.RUnlock()
	if len(a.order) == 0 {
		return nil
	}
	out := make([]*ArtifactEntry, 0, len(a.order))
	for _, id := range a.order {
		out = append(out, a.items[id])
	}
	return out
}

// restore fills the store from a checkpoint's snapshot.
func (a *Artifacts) restore(list []*ArtifactEntry) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, it := range list {
		if it == nil || a.items[it.Info.ID] != nil {
			continue
		}
		a.items[it.Info.ID] = it
		a.order = append(a.order, it.Info.ID)
	}
}

// RunArtifacts is the artifact store of the run in logsRoot as its
// checkpoint left it (the artifacts of the nodes finished so far), for
// readers outside the run (nb serve's artifact routes).
func RunArtifacts(logsRoot string, cp *Checkpoint) *Artifacts {
	a := NewArtifacts(logsRoot)
	if cp != nil {
		a.restore(cp.Artifacts)
	}
	return a
}
