package engine

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nbots/nb/internal/atomicfile"
)

// ManifestFile is the manifest's name in the run folder.
const ManifestFile = "manifest.json"

// Manifest is manifest.json (§5.6: name, goal, start time) with nb's
// additions: the run id, the graph file, the run's end and totals.
type Manifest struct {
	Name      string    `json:"name"`
	Goal      string    `json:"goal"`
	StartTime time.Time `json:"start_time"`
	RunID     string    `json:"run_id"`
	GraphFile string    `json:"graph_file"`
	GraphHash string    `json:"graph_sha256"`
	// Status is "running" until the run ends, then success or fail.
	Status        string     `json:"status"`
	EndTime       *time.Time `json:"end_time,omitempty"`
	FailureReason string     `json:"failure_reason,omitempty"`
	Steps         int        `json:"steps"`
	// Tokens are the run's total (every stage, every attempt).
	Tokens Tokens `json:"tokens"`
	// Resumes counts the times the run was resumed.
	Resumes int `json:"resumes,omitempty"`
}

// Save writes m as dir/manifest.json atomically.
func (m *Manifest) Save(dir string) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("save manifest: %w", err)
	}
	return atomicfile.WriteFile(filepath.Join(dir, ManifestFile), append(data, '\n'), 0o644)
}

// LoadManifest reads dir/manifest.json.
func LoadManifest(dir string) (*Manifest, error) {
	data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ManifestFile), err)
	}
	return &m, nil
}
