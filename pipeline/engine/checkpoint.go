package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// CheckpointFile is the checkpoint's name in the run folder.
const CheckpointFile = "checkpoint.json"

// Checkpoint is §5.3's checkpoint, with the keys it names (timestamp,
// current_node, completed_nodes, node_retries, context, logs) and nb's,
// which a resume needs to run no finished node twice: the graph's hash,
// the last stage's outcome (to select the next edge again), the outcomes
// goal gates read, visits, steps and tokens.
type Checkpoint struct {
	Timestamp      time.Time      `json:"timestamp"`
	CurrentNode    string         `json:"current_node"`
	CompletedNodes []string       `json:"completed_nodes"`
	NodeRetries    map[string]int `json:"node_retries"`
	Context        map[string]any `json:"context"`
	Logs           []string       `json:"logs"`

	// Version is the checkpoint format (1).
	Version int `json:"nb_version"`
	// GraphHash is the SHA-256 of the graph's text: a resume refuses a
	// checkpoint written for another graph.
	GraphHash string `json:"graph_sha256"`
	// GraphFile is where the graph was read from (for messages and for
	// resume, which reads it again).
	GraphFile string `json:"graph_file"`
	RunID     string `json:"run_id"`
	// LastOutcome is current_node's outcome: edge selection runs again
	// from it on resume.
	LastOutcome *Outcome `json:"last_outcome,omitempty"`
	// LastFidelity is the fidelity current_node ran at (a resume after
	// `full` runs the next LLM node at summary:high once, §5.3).
	LastFidelity string `json:"last_fidelity,omitempty"`
	// Statuses are the statuses of CompletedNodes, one for one ("" for
	// the nodes of parallel branches). Goal gates' outcomes and the
	// visit counts are derived from them: maps would be sorted at every
	// save.
	Statuses []Status `json:"completed_outcomes"`
	// RestartAt is the length of CompletedNodes at the last loop
	// restart: goal gates read the outcomes after it.
	RestartAt int `json:"restart_at,omitempty"`
	// Outcomes are each node's last status since the last restart (goal
	// gates) and Visits each node's runs: derived, not saved.
	Outcomes map[string]Status `json:"-"`
	Visits   map[string]int    `json:"-"`
	Steps    int               `json:"steps"`
	Tokens   Tokens            `json:"tokens"`
	// Restarts counts loop_restart edges taken; stage folders of restart
	// n live in restart-n/.
	Restarts int `json:"restarts,omitempty"`
	// Done is set when the run has ended (Status is its end).
	Done   bool   `json:"done,omitempty"`
	Status Status `json:"status,omitempty"`
	// FailureReason is why a finished run failed.
	FailureReason string `json:"failure_reason,omitempty"`
	// Vars are the run's --set variables (resume uses them again).
	Vars map[string]string `json:"vars,omitempty"`
	// Cartridge is the run's --cartridge (resume uses it again).
	Cartridge string `json:"cartridge,omitempty"`
	// Saves counts the checkpoint's saves: LoadCheckpoint takes the
	// newer of checkpoint.json and the journal's last line by it.
	Saves int `json:"nb_saves,omitempty"`
	// Artifacts are the run's artifacts (§5.5): the files of the
	// file-backed ones stay in artifacts/, the others' data is here, so
	// that a resumed run still has them.
	Artifacts []*ArtifactEntry `json:"artifacts,omitempty"`
}

// checkpointVersion is the format Version this code writes and reads.
const checkpointVersion = 1

// HashGraph is the hash a checkpoint keeps of its graph's text.
func HashGraph(src []byte) string {
	sum := sha256.Sum256(src)
	return hex.EncodeToString(sum[:])
}

// Marshal encodes cp as checkpoint.json holds it.
func (cp *Checkpoint) Marshal() ([]byte, error) {
	cp.Version = checkpointVersion
	data, err := json.Marshal(cp)
	if err != nil {
		return nil, fmt.Errorf("save checkpoint: %w", err)
	}
	return data, nil
}

// ErrNoCheckpoint says a folder has no checkpoint.json.
var ErrNoCheckpoint = errors.New("no checkpoint.json")

// NoCheckpointError is LoadCheckpoint's answer for a folder without
// checkpoint.json; it is ErrNoCheckpoint for errors.Is. The command that
// named the folder may say how it named it.
type NoCheckpointError struct {
	// Path is the checkpoint.json looked for, Dir its folder.
	Path, Dir string
}

func (e *NoCheckpointError) Error() string {
	return fmt.Sprintf("%s: %v: is %s the folder of a run?", e.Path, ErrNoCheckpoint, e.Dir)
}

func (e *NoCheckpointError) Unwrap() error { return ErrNoCheckpoint }

// LoadCheckpoint reads the checkpoint of run folder dir and checks it
// can be resumed: it parses, has this code's format and names a current
// node. It is checkpoint.json, or the last line of the checkpoint
// journal when that one is newer (a process killed between the two
// writes) or checkpoint.json is missing or empty (a power cut before it
// reached the disk). A checkpoint.json with text that does not parse is
// refused, journal or not: nb never leaves one (someone edited it).
// Check it against the graph with Verify.
func LoadCheckpoint(dir string) (*Checkpoint, error) {
	path := filepath.Join(dir, CheckpointFile)
	data, err := os.ReadFile(path)
	var cp *Checkpoint
	switch {
	case errors.Is(err, os.ErrNotExist):
		err = &NoCheckpointError{Path: path, Dir: dir}
	case err != nil:
		return nil, fmt.Errorf("read checkpoint: %w", err)
	case len(data) == 0:
		err = fmt.Errorf("%s: the checkpoint is empty: it cannot be resumed; start the run again with nb pipeline run", path)
	default:
		if cp, err = ParseCheckpoint(path, data); err != nil {
			return nil, err
		}
	}
	if j := lastJournaled(dir); j != nil && (cp == nil || j.Saves > cp.Saves) {
		return j, nil
	}
	return cp, err
}

// ParseCheckpoint parses the text of a checkpoint (path names it in
// errors).
func ParseCheckpoint(path string, data []byte) (*Checkpoint, error) {
	var cp Checkpoint
	if err := json.Unmarshal(data, &cp); err != nil {
		return nil, fmt.Errorf("%s: the checkpoint does not parse (%v): it cannot be resumed; start the run again with nb pipeline run", path, err)
	}
	if cp.Version != checkpointVersion {
		return nil, fmt.Errorf("%s: checkpoint format %d, this nb reads format %d: start the run again with nb pipeline run", path, cp.Version, checkpointVersion)
	}
	if cp.CurrentNode == "" || cp.GraphHash == "" {
		return nil, fmt.Errorf("%s: the checkpoint has no current_node or graph_sha256: it was not written by nb pipeline run and cannot be resumed", path)
	}
	if cp.Context == nil {
		cp.Context = map[string]any{}
	}
	if cp.NodeRetries == nil {
		cp.NodeRetries = map[string]int{}
	}
	if len(cp.Statuses) != len(cp.CompletedNodes) || cp.RestartAt > len(cp.CompletedNodes) {
		return nil, fmt.Errorf("%s: completed_outcomes does not match completed_nodes: the checkpoint is damaged; start the run again", path)
	}
	cp.Outcomes, cp.Visits = map[string]Status{}, map[string]int{}
	for i, id := range cp.CompletedNodes {
		if cp.Statuses[i] == "" {
			continue // a branch's node
		}
		cp.Visits[id]++
		if i >= cp.RestartAt {
			cp.Outcomes[id] = cp.Statuses[i]
		}
	}
	return &cp, nil
}

// Verify refuses a checkpoint written for another graph than src (the
// text of the graph file): resuming it would run the wrong nodes.
func (cp *Checkpoint) Verify(file string, src []byte) error {
	if h := HashGraph(src); h != cp.GraphHash {
		return fmt.Errorf("the checkpoint was written for another graph (%s, sha256 %.12s…) than %s (sha256 %.12s…): the graph changed since the run started, or this is another run's folder; restore the graph or start a new run", cp.GraphFile, cp.GraphHash, file, h)
	}
	return nil
}
