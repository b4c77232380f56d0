package engine

import (
	"encoding/json"
	"io"
	"sync"
	"time"
)

// Kind names an event, as §9.6 names it.
type Kind string

// The events of §9.6, and nb's own (EdgeSelected, StageRunning,
// PipelineWarning), which front-ends use to show where a run goes.
const (
	PipelineStarted         Kind = "PipelineStarted"
	PipelineCompleted       Kind = "PipelineCompleted"
	PipelineFailed          Kind = "PipelineFailed"
	StageStarted            Kind = "StageStarted"
	StageCompleted          Kind = "StageCompleted"
	StageFailed             Kind = "StageFailed"
	StageRetrying           Kind = "StageRetrying"
	ParallelStarted         Kind = "ParallelStarted"
	ParallelBranchStarted   Kind = "ParallelBranchStarted"
	ParallelBranchCompleted Kind = "ParallelBranchCompleted"
	ParallelCompleted       Kind = "ParallelCompleted"
	InterviewStarted        Kind = "InterviewStarted"
	InterviewCompleted      Kind = "InterviewCompleted"
	InterviewTimeout        Kind = "InterviewTimeout"
	CheckpointSaved         Kind = "CheckpointSaved"
	// EdgeSelected (nb) says which edge traversal took after a stage.
	EdgeSelected Kind = "EdgeSelected"
	// StageProgress (nb) reports a running stage's tokens so far.
	StageProgress Kind = "StageProgress"
	// PipelineWarning (nb) is something the user should know that does
	// not stop the run (it ended short of the exit, D15).
	PipelineWarning Kind = "PipelineWarning"
)

// Event is one event. Only the fields of its kind are set; the JSON
// form (one line of --events) leaves the others out. Durations and
// delays are in milliseconds.
type Event struct {
	Kind Kind      `json:"event"`
	Time time.Time `json:"time"`
	// RunID identifies the run (PipelineStarted's id, on every event).
	RunID string `json:"run_id,omitempty"`
	// Name is the pipeline's name (Pipeline*) or the stage's node id.
	Name  string `json:"name,omitempty"`
	Index int    `json:"index,omitempty"`
	// Branch is the parallel node's id on the events of a branch's stages
	// and the branch's first node on ParallelBranch*.
	Branch   string  `json:"branch,omitempty"`
	Duration float64 `json:"duration_ms,omitempty"`
	Error    string  `json:"error,omitempty"`
	// WillRetry is StageFailed's will_retry.
	WillRetry bool    `json:"will_retry,omitempty"`
	Attempt   int     `json:"attempt,omitempty"`
	Delay     float64 `json:"delay_ms,omitempty"`
	// Status is a finished stage's outcome (nb).
	Status  Status `json:"outcome,omitempty"`
	Notes   string `json:"notes,omitempty"`
	Success *bool  `json:"success,omitempty"`
	// Counts of the parallel events.
	BranchCount  int `json:"branch_count,omitempty"`
	SuccessCount int `json:"success_count,omitempty"`
	FailureCount int `json:"failure_count,omitempty"`
	// Interview events.
	Question string `json:"question,omitempty"`
	Answer   string `json:"answer,omitempty"`
	Stage    string `json:"stage,omitempty"`
	// EdgeSelected.
	From  string `json:"from,omitempty"`
	To    string `json:"to,omitempty"`
	Label string `json:"label,omitempty"`
	// ArtifactCount is PipelineCompleted's artifact_count.
	ArtifactCount int `json:"artifact_count,omitempty"`
	// Tokens are a stage's (StageCompleted, StageFailed, StageProgress)
	// or the run's (PipelineCompleted, PipelineFailed).
	Tokens *Tokens `json:"tokens,omitempty"`
	// NodeID is CheckpointSaved's node_id.
	NodeID string `json:"node_id,omitempty"`
}

// Observer receives a run's events, one at a time, in order. It must not
// block for long: the run waits for it.
type Observer interface {
	OnEvent(Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Event)

// OnEvent calls f.
func (f ObserverFunc) OnEvent(ev Event) { f(ev) }

// Observers sends each event to every observer in turn.
type Observers []Observer

// OnEvent sends ev to each observer.
func (os Observers) OnEvent(ev Event) {
	for _, o := range os {
		if o != nil {
			o.OnEvent(ev)
		}
	}
}

// JSONLines writes each event as one line of JSON. It is safe for
// concurrent use; the first write error is kept (Err) and later events
// are dropped.
type JSONLines struct {
	mu  sync.Mutex
	w   io.Writer
	err error
}

// NewJSONLines writes events to w.
func NewJSONLines(w io.Writer) *JSONLines { return &JSONLines{w: w} }

// OnEvent writes ev.
func (j *JSONLines) OnEvent(ev Event) {
	data, err := json.Marshal(ev)
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return
	}
	if err != nil {
		j.err = err
		return
	}
	_, j.err = j.w.Write(append(data, '\n'))
}

// Err is the first write error.
func (j *JSONLines) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
