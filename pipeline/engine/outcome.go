package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nbots/nb/internal/atomicfile"
)

// Status is a stage's status, spelled as status.json and conditions
// spell it (lowercase).
type Status string

// The statuses of §5.2.
const (
	Success        Status = "success"
	PartialSuccess Status = "partial_success"
	Retry          Status = "retry"
	Fail           Status = "fail"
	Skipped        Status = "skipped"
)

// ParseStatus reads a status as status.json or a model writes it; case
// and surrounding blanks do not matter ("SUCCESS" is success).
func ParseStatus(s string) (Status, error) {
	switch st := Status(strings.ToLower(strings.TrimSpace(s))); st {
	case Success, PartialSuccess, Retry, Fail, Skipped:
		return st, nil
	}
	return "", fmt.Errorf("unknown outcome %q: use success, partial_success, retry or fail", s)
}

// OK reports whether s lets a goal gate pass (SUCCESS or PARTIAL_SUCCESS).
func (s Status) OK() bool { return s == Success || s == PartialSuccess }

// Tokens are the tokens a stage (or a run) spent, as the providers count
// them.
type Tokens struct {
	Input      int `json:"input"`
	Output     int `json:"output"`
	CacheRead  int `json:"cache_read,omitempty"`
	CacheWrite int `json:"cache_write,omitempty"`
	Reasoning  int `json:"reasoning,omitempty"`
}

// Add adds u's counts to t's.
func (t *Tokens) Add(u Tokens) {
	t.Input += u.Input
	t.Output += u.Output
	t.CacheRead += u.CacheRead
	t.CacheWrite += u.CacheWrite
	t.Reasoning += u.Reasoning
}

// Total is what a token budget counts: input plus output (cache and
// reasoning tokens are parts of those).
func (t Tokens) Total() int { return t.Input + t.Output }

// Outcome is the result of a stage (§5.2), serialised as status.json
// (Appendix C) with nb's additions: failure_reason, the stage's tokens,
// and jump_to.
type Outcome struct {
	Status           Status         `json:"outcome"`
	PreferredLabel   string         `json:"preferred_label,omitempty"`
	SuggestedNextIDs []string       `json:"suggested_next_ids,omitempty"`
	ContextUpdates   map[string]any `json:"context_updates,omitempty"`
	Notes            string         `json:"notes,omitempty"`
	FailureReason    string         `json:"failure_reason,omitempty"`
	// Tokens are what the stage spent on models (all its attempts, once
	// the engine has added them up).
	Tokens *Tokens `json:"tokens,omitempty"`
	// JumpTo, set by the parallel handler, is where traversal goes next
	// instead of edge selection: the branches' common fan-in (D12).
	JumpTo string `json:"jump_to,omitempty"`
}

// Failf is a FAIL outcome with a formatted reason.
func Failf(format string, args ...any) Outcome {
	return Outcome{Status: Fail, FailureReason: fmt.Sprintf(format, args...)}
}

// StatusFile is the name of a stage's status file.
const StatusFile = "status.json"

// WriteStatus writes o as dir/status.json, atomically.
func WriteStatus(dir string, o Outcome) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	data, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		return fmt.Errorf("write status %s: %w", dir, err)
	}
	return atomicfile.WriteFile(filepath.Join(dir, StatusFile), append(data, '\n'), 0o644)
}

// ErrNoStatus says a stage folder holds no status.json.
var ErrNoStatus = errors.New("no status.json")

// ReadStatus reads dir/status.json as the status-file contract says
// (Appendix C): outcome is required; the other fields are optional.
// It accepts preferred_next_label as an alias of preferred_label.
func ReadStatus(dir string) (Outcome, error) {
	path := filepath.Join(dir, StatusFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Outcome{}, ErrNoStatus
	}
	if err != nil {
		return Outcome{}, err
	}
	return ParseStatusFile(path, data)
}

// ParseStatusFile parses the text of a status.json (path names it in
// errors).
func ParseStatusFile(path string, data []byte) (Outcome, error) {
	var raw struct {
		Outcome            string         `json:"outcome"`
		PreferredLabel     string         `json:"preferred_label"`
		PreferredNextLabel string         `json:"preferred_next_label"`
		SuggestedNextIDs   []string       `json:"suggested_next_ids"`
		ContextUpdates     map[string]any `json:"context_updates"`
		Notes              string         `json:"notes"`
		FailureReason      string         `json:"failure_reason"`
		Tokens             *Tokens        `json:"tokens"`
		JumpTo             string         `json:"jump_to"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return Outcome{}, fmt.Errorf("%s: not a status file: %v", path, err)
	}
	if raw.Outcome == "" {
		return Outcome{}, fmt.Errorf("%s: the required field \"outcome\" is missing (success, partial_success, retry or fail)", path)
	}
	st, err := ParseStatus(raw.Outcome)
	if err != nil {
		return Outcome{}, fmt.Errorf("%s: %v", path, err)
	}
	o := Outcome{Status: st, PreferredLabel: raw.PreferredLabel, SuggestedNextIDs: raw.SuggestedNextIDs,
		ContextUpdates: raw.ContextUpdates, Notes: raw.Notes, FailureReason: raw.FailureReason, Tokens: raw.Tokens, JumpTo: raw.JumpTo}
	if o.PreferredLabel == "" {
		o.PreferredLabel = raw.PreferredNextLabel
	}
	return o, nil
}
