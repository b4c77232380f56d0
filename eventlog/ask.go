package eventlog

import (
	"context"
	"fmt"
	"time"

	"github.com/nbots/nb/tool"
)

// QuestionKind tells what a question asks.
type QuestionKind uint8

const (
	// Confirm asks whether a tool call may run: Reply.Allow.
	Confirm QuestionKind = iota + 1
	// RunTool asks the person's side to run a tool call and give its
	// result: Reply.Output, IsError and Context.
	RunTool
)

func (k QuestionKind) String() string {
	if k == Confirm {
		return "confirm"
	}
	return "tool_call"
}

// Question is what an exchange asks a person, or the program acting for
// them.
type Question struct {
	// ID names the question in its log; the answer gives it back.
	ID   string
	Kind QuestionKind
	// Name and Input are the tool call's.
	Name  string
	Input map[string]any
	// Text is the confirming feedback a person reads (Confirm).
	Text string
}

// Reply is the answer to a question.
type Reply struct {
	Allow   bool // Confirm
	Output  any  // RunTool: the tool's result
	IsError bool // RunTool: the result is a failure
	Context any  // RunTool: the client's context, given back
}

// Pending is a question asked, waiting for its answer.
type Pending struct {
	l  *Log
	q  Question
	ch chan outcome
}

type outcome struct {
	reply Reply
	err   error
}

func (p *Pending) settle(r Reply, err error) {
	p.ch <- outcome{r, err} // buffered: settled once, under the log's lock
}

// Ask appends q as an Ask event (even to a full log: a question is
// small and the exchange waits on it) and returns it waiting for its
// answer: the caller tells the person, then waits with Pending.Wait.
func (l *Log) Ask(q Question) (*Pending, error) {
	l.mu.Lock()
	defer l.unlock()
	if l.status != Open {
		return nil, ErrClosed
	}
	if _, dup := l.asked[q.ID]; dup || l.answered[q.ID] {
		return nil, fmt.Errorf("question %s was already asked", q.ID)
	}
	if l.asked == nil {
		l.asked, l.answered = map[string]*Pending{}, map[string]bool{}
	}
	p := &Pending{l: l, q: q, ch: make(chan outcome, 1)}
	l.asked[q.ID] = p
	qc := q
	l.events = append(l.events, entry{Event: Event{Kind: Ask, Question: &qc}})
	size := eventOverhead + int64(len(q.Text)+len(q.Name)+len(q.ID))
	l.used += size
	l.grow(size)
	l.notify()
	return p, nil
}

// Question is what p asks.
func (p *Pending) Question() Question { return p.q }

// Wait waits for the answer, until ctx is done (its error) or timeout
// passes (timeout <= 0: no limit; a *TimeoutError). A question no
// longer waited for cannot be answered.
func (p *Pending) Wait(ctx context.Context, timeout time.Duration) (Reply, error) {
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	select {
	case o := <-p.ch:
		return o.reply, o.err
	case <-ctx.Done():
		p.forget()
		return Reply{}, ctx.Err()
	case <-expired:
		p.forget()
		return Reply{}, &TimeoutError{Question: p.q, After: timeout}
	}
}

// forget stops waiting for the question.
func (p *Pending) forget() {
	p.l.mu.Lock()
	if p.l.asked[p.q.ID] == p {
		delete(p.l.asked, p.q.ID)
	}
	p.l.mu.Unlock()
}

// Answer delivers the answer to the question id of kind. An answer to no
// waiting question, or a second answer, is an *AnswerError.
func (l *Log) Answer(id string, kind QuestionKind, r Reply) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	p, ok := l.asked[id]
	switch {
	case !ok && l.answered[id]:
		return &AnswerError{ID: id, Kind: kind, Again: true}
	case !ok || p.q.Kind != kind:
		return &AnswerError{ID: id, Kind: kind}
	}
	delete(l.asked, id)
	l.answered[id] = true
	p.settle(r, nil)
	return nil
}

// AnswerError is an answer the log cannot take.
type AnswerError struct {
	ID   string
	Kind QuestionKind
	// Again: the question was answered already; else none such waits.
	Again bool
}

func (e *AnswerError) Error() string {
	if e.Again {
		return fmt.Sprintf("%s %s was already answered: this second answer is ignored", e.Kind, e.ID)
	}
	return fmt.Sprintf("no %s %s is waiting for an answer", e.Kind, e.ID)
}

// TimeoutError is a question nobody answered in time.
type TimeoutError struct {
	Question Question
	After    time.Duration
}

func (e *TimeoutError) Error() string {
	what := "tool_result"
	if e.Question.Kind == Confirm {
		what = "confirm_result"
	}
	return fmt.Sprintf("no %s for %s within %s", what, e.Question.ID, e.After)
}

// Confirmer confirms tool calls by asking whoever follows Log: each call
// is an Ask event, and the exchange waits for Log.Answer up to Timeout
// (no limit when <= 0). A question nobody answers in time denies the
// call and fails the exchange. It implements agent.Confirmer.
type Confirmer struct {
	Log     *Log
	Timeout time.Duration
}

// Confirm asks about call; text is the confirming feedback.
func (c Confirmer) Confirm(ctx context.Context, call tool.Call, text string) (bool, error) {
	p, err := c.Log.Ask(Question{ID: call.ID, Kind: Confirm, Name: call.Name, Input: call.Arguments, Text: text})
	if err != nil {
		return false, err
	}
	r, err := p.Wait(ctx, c.Timeout)
	return r.Allow && err == nil, err
}
