package pipelinesrv

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/nbots/nb/pipeline"
	"github.com/nbots/nb/pipeline/engine"
	"github.com/nbots/nb/pipeline/handler"
)

// Runs is where a server's pipeline runs live: the HTTP routes only go
// through it, so that another implementation (runs kept in a shared
// database and followed from any replica) can replace Local, which runs
// them in this process and keeps them in memory and in run folders.
type Runs interface {
	// Start starts a run of spec and returns it; the run goes on when ctx
	// (the request's) ends, and stops when spec.Context does.
	Start(spec Spec) (Run, error)
	// Get returns the run id when owner may see it (ErrNotFound
	// otherwise, the same for an unknown id and another owner's).
	Get(ctx context.Context, owner, id string) (Run, error)
	// Resume continues the stopped run id (interrupted or cancelled)
	// from its checkpoint with spec (its graph read again, its handlers;
	// the caller found it with Get, for its owner); ErrNotStopped when
	// the run is not stopped.
	Resume(id string, spec Spec) (Run, error)
	// List are owner's runs that the store holds at hand (Local: those
	// in memory), the most recent first.
	List(ctx context.Context, owner string) ([]Info, error)
	// Close cancels the runs still going (each keeps its checkpoint) and
	// waits for them to stop.
	Close() error
}

// Run is one pipeline run.
type Run interface {
	// ID identifies the run.
	ID() string
	// Info is the run's state now.
	Info() Info
	// Follow calls fn with the run's events after the one numbered after
	// (0: from the first), then with each new one as it comes, until the
	// run has ended and every event was given (nil), fn fails or ctx
	// ends (their error).
	Follow(ctx context.Context, after int64, fn func(Event) error) error
	// Questions are the questions waiting for an answer.
	Questions() []handler.Question
	// Answer answers the waiting question qid (ErrNoQuestion when none
	// waits under that id).
	Answer(ctx context.Context, qid string, a handler.Answer) error
	// Cancel stops the run; its checkpoint stays. It returns once the run
	// has stopped, or ctx ends.
	Cancel(ctx context.Context) error
	// Checkpoint is the run's checkpoint.json (ErrNoCheckpoint before the
	// first node has finished).
	Checkpoint() ([]byte, error)
	// Graph is the run's graph.
	Graph() *pipeline.Graph
	// Artifacts is the run's artifact store (§5.5) as its checkpoint
	// left it.
	Artifacts() (*engine.Artifacts, error)
	// Params are what the run was started with; Source is its graph's
	// text (what a resume of a graph sent as text reads again).
	Params() Params
	Source() ([]byte, error)
}

// Params are what a run was started with, kept with it (a resume uses
// them again).
type Params struct {
	// File is the served file's name as the client gave it ("" for a
	// graph sent as text).
	File      string            `json:"file,omitempty"`
	Cartridge string            `json:"cartridge"`
	Vars      map[string]string `json:"set,omitempty"`
	MaxSteps  int               `json:"max_steps,omitempty"`
	MaxTokens int               `json:"max_tokens,omitempty"`
}

// Spec is what a run is started with.
type Spec struct {
	// Context is the run's: its end stops the run (the server's shutdown,
	// its deadline), and it carries the request's token for the
	// catalog. Done is called once the run has ended (the admission).
	Context context.Context
	Done    func()
	// Owner is who may see the run (server.Owner of the request).
	Owner string
	// Graph is the checked graph, Source its text, Path the served file
	// it was read from ("" for a graph sent as text).
	Graph  *pipeline.Graph
	Source []byte
	Path   string
	// Params are the run's cartridge, variables and budgets.
	Params Params
	// Handlers are the handlers' options; the run supplies the
	// Interviewer (its questions wait for /answer).
	Handlers handler.Options
}

// Info is a run's state, GET /pipelines/{id}.
type Info struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Goal string `json:"goal,omitempty"`
	// Status is running, waiting (a question waits for an answer),
	// success, fail, cancelled or interrupted (the server stopped; the
	// checkpoint lets the run be resumed).
	Status         string        `json:"status"`
	CurrentNode    string        `json:"current_node,omitempty"`
	CompletedNodes []string      `json:"completed_nodes"`
	Questions      int           `json:"questions"`
	FailureReason  string        `json:"failure_reason,omitempty"`
	StartedAt      time.Time     `json:"started_at"`
	EndedAt        *time.Time    `json:"ended_at,omitempty"`
	Steps          int           `json:"steps"`
	Tokens         engine.Tokens `json:"tokens"`
	Events         int64         `json:"events"`
}

// The statuses of Info.
const (
	StatusRunning     = "running"
	StatusWaiting     = "waiting"
	StatusSuccess     = "success"
	StatusFail        = "fail"
	StatusCancelled   = "cancelled"
	StatusInterrupted = "interrupted"
)

// Ended reports whether the status is final.
func Ended(status string) bool {
	return status != StatusRunning && status != StatusWaiting && status != ""
}

// Event is an engine event with its number in the run (the SSE id).
type Event struct {
	Seq int64
	engine.Event
}

// MarshalJSON writes the engine's event with its number as "seq".
func (e Event) MarshalJSON() ([]byte, error) {
	data, err := json.Marshal(e.Event)
	if err != nil || len(data) < 2 {
		return data, err
	}
	seq, _ := json.Marshal(e.Seq)
	out := append([]byte(`{"seq":`), seq...)
	if len(data) > 2 {
		out = append(out, ',')
	}
	return append(out, data[1:]...), nil
}

var (
	// ErrNotFound says there is no such run (for this owner).
	ErrNotFound = errors.New("no such pipeline run")
	// ErrNoCheckpoint says the run has no checkpoint yet.
	ErrNoCheckpoint = errors.New("the run has no checkpoint yet: it is written when the first node finishes")
	// ErrNotStopped says a resume found the run running or ended.
	ErrNotStopped = errors.New("the run is not stopped")
	// ErrNoQuestion says no question waits under that id.
	ErrNoQuestion = handler.ErrNoQuestion
	// errCancelled is the cause of a run cancelled over HTTP.
	errCancelled = errors.New("cancelled by POST /pipelines/{id}/cancel")
)
