package handler

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
)

// QuestionType is §6.2's question type.
type QuestionType string

// The question types of §6.2.
const (
	YesNo          QuestionType = "YES_NO"
	MultipleChoice QuestionType = "MULTIPLE_CHOICE"
	Freeform       QuestionType = "FREEFORM"
	Confirmation   QuestionType = "CONFIRMATION"
)

// Option is a choice of a MULTIPLE_CHOICE question.
type Option struct {
	Key   string `json:"key"`
	Label string `json:"label"`
}

// Question is §6.2's question.
type Question struct {
	// ID identifies the question among a run's (the answer endpoint's qid).
	ID      string       `json:"id"`
	Text    string       `json:"text"`
	Type    QuestionType `json:"type"`
	Options []Option     `json:"options,omitempty"`
	Default *Answer      `json:"default,omitempty"`
	// Timeout is the longest wait (0: none); the node's timeout (D17).
	Timeout  time.Duration  `json:"timeout_seconds,omitempty"`
	Stage    string         `json:"stage"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// Values of Answer.Value besides an option's key (§6.3).
const (
	Yes      = "YES"
	No       = "NO"
	SkipIt   = "SKIPPED"
	TimedOut = "TIMEOUT"
)

// Answer is §6.3's answer.
type Answer struct {
	Value    string  `json:"value"`
	Selected *Option `json:"selected_option,omitempty"`
	Text     string  `json:"text,omitempty"`
}

// Interviewer asks a human (§6.1). Ask blocks until an answer, the
// question's timeout (an Answer TIMEOUT) or ctx's end (its error).
type Interviewer interface {
	Ask(ctx context.Context, q Question) (Answer, error)
	Inform(message, stage string)
}

// AskMultiple asks each question in turn (§6.1's ask_multiple).
func AskMultiple(ctx context.Context, iv Interviewer, qs []Question) ([]Answer, error) {
	out := make([]Answer, 0, len(qs))
	for _, q := range qs {
		a, err := iv.Ask(ctx, q)
		if err != nil {
			return out, err
		}
		out = append(out, a)
	}
	return out, nil
}

// AutoApprove answers YES, or the first option (§6.4): for CI.
type AutoApprove struct{}

// Ask approves.
func (AutoApprove) Ask(_ context.Context, q Question) (Answer, error) {
	switch {
	case q.Type == YesNo || q.Type == Confirmation:
		return Answer{Value: Yes}, nil
	case q.Type == MultipleChoice && len(q.Options) > 0:
		o := q.Options[0]
		return Answer{Value: o.Key, Selected: &o}, nil
	}
	return Answer{Value: "auto-approved", Text: "auto-approved"}, nil
}

// Inform does nothing.
func (AutoApprove) Inform(string, string) {}

// Callback delegates each question to a function (§6.4).
type Callback func(ctx context.Context, q Question) (Answer, error)

// Ask calls f.
func (f Callback) Ask(ctx context.Context, q Question) (Answer, error) { return f(ctx, q) }

// Inform does nothing.
func (Callback) Inform(string, string) {}

// Queue answers from a pre-filled list, then SKIPPED (§6.4's
// QueueInterviewer: deterministic tests and replays).
type Queue struct {
	mu      sync.Mutex
	Answers []Answer
}

// Ask takes the next answer.
func (q *Queue) Ask(context.Context, Question) (Answer, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.Answers) == 0 {
		return Answer{Value: SkipIt}, nil
	}
	a := q.Answers[0]
	q.Answers = q.Answers[1:]
	return a, nil
}

// Inform does nothing.
func (*Queue) Inform(string, string) {}

// Recording wraps an interviewer and keeps every question with its answer.
type Recording struct {
	Inner Interviewer
	mu    sync.Mutex
	Pairs []QA
}

// QA is a recorded question and its answer.
type QA struct {
	Q Question
	A Answer
}

// Ask asks Inner and records the pair.
func (r *Recording) Ask(ctx context.Context, q Question) (Answer, error) {
	a, err := r.Inner.Ask(ctx, q)
	if err == nil {
		r.mu.Lock()
		r.Pairs = append(r.Pairs, QA{q, a})
		r.mu.Unlock()
	}
	return a, err
}

// Inform passes the message on.
func (r *Recording) Inform(m, stage string) { r.Inner.Inform(m, stage) }

// Pending holds questions until another front-end answers them (the HTTP
// mode's /questions and /questions/{qid}/answer, a chat channel): Ask
// waits for Answer, the question's timeout or ctx's end. It is safe for
// concurrent use.
type Pending struct {
	mu      sync.Mutex
	next    int
	waiting map[string]*pendingQ
	// OnAsk, when set, is told of each new question (a channel posts it).
	OnAsk func(Question)
}

type pendingQ struct {
	q  Question
	ch chan Answer
}

// ErrNoQuestion says no question with that id is waiting.
var ErrNoQuestion = errors.New("no such question is waiting for an answer")

// Ask waits for the question's answer.
func (p *Pending) Ask(ctx context.Context, q Question) (Answer, error) {
	p.mu.Lock()
	if p.waiting == nil {
		p.waiting = map[string]*pendingQ{}
	}
	p.next++
	if q.ID == "" {
		q.ID = strconv.Itoa(p.next)
	}
	w := &pendingQ{q: q, ch: make(chan Answer, 1)}
	p.waiting[q.ID] = w
	onAsk := p.OnAsk
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.waiting, q.ID)
		p.mu.Unlock()
	}()
	if onAsk != nil {
		onAsk(q)
	}
	var timeout <-chan time.Time
	if q.Timeout > 0 {
		t := time.NewTimer(q.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case a := <-w.ch:
		return a, nil
	case <-timeout:
		return Answer{Value: TimedOut}, nil
	case <-ctx.Done():
		return Answer{}, ctx.Err()
	}
}

// Questions lists the questions waiting for an answer.
func (p *Pending) Questions() []Question {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Question, 0, len(p.waiting))
	for _, w := range p.waiting {
		out = append(out, w.q)
	}
	return out
}

// Answer answers the waiting question id; the value is an option's key
// (or label), YES/NO, SKIPPED, or free text.
func (p *Pending) Answer(id string, a Answer) error {
	p.mu.Lock()
	w, ok := p.waiting[id]
	if ok {
		delete(p.waiting, id)
	}
	p.mu.Unlock()
	if !ok {
		return fmt.Errorf("question %s: %w", id, ErrNoQuestion)
	}
	w.ch <- a
	return nil
}

// Inform does nothing (front-ends show events).
func (*Pending) Inform(string, string) {}

// Console asks on a terminal (§6.4's ConsoleInterviewer): the options
// with their keys, the default and the time left; the answer is a key or
// a label, read from In. Lines come from one reader shared by every
// question.
type Console struct {
	In  io.Reader
	Out io.Writer

	once  sync.Once
	lines chan string
}

func (c *Console) start() {
	c.once.Do(func() {
		c.lines = make(chan string)
		go func() {
			sc := bufio.NewScanner(c.In)
			for sc.Scan() {
				c.lines <- sc.Text()
			}
			close(c.lines)
		}()
	})
}

// Ask prints the question and reads the answer.
func (c *Console) Ask(ctx context.Context, q Question) (Answer, error) {
	c.start()
	fmt.Fprintf(c.Out, "[?] %s\n", q.Text)
	prompt := "> "
	switch q.Type {
	case MultipleChoice:
		for _, o := range q.Options {
			if AcceleratorKey(o.Label) == o.Key && strings.HasPrefix(o.Label, "["+o.Key+"]") {
				fmt.Fprintf(c.Out, "  %s\n", o.Label) // the label shows its key already
				continue
			}
			fmt.Fprintf(c.Out, "  [%s] %s\n", o.Key, o.Label)
		}
		prompt = "Select: "
	case YesNo, Confirmation:
		prompt = "[Y/N]: "
	}
	if q.Timeout > 0 {
		fmt.Fprintf(c.Out, "  (%s to answer", q.Timeout)
		if q.Default != nil {
			fmt.Fprintf(c.Out, "; then %s", q.Default.Value)
		}
		fmt.Fprintln(c.Out, ")")
	}
	fmt.Fprint(c.Out, prompt)
	var timeout <-chan time.Time
	if q.Timeout > 0 {
		t := time.NewTimer(q.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case line, ok := <-c.lines:
		if !ok {
			return Answer{Value: SkipIt}, nil
		}
		line = strings.TrimSpace(line)
		switch q.Type {
		case YesNo, Confirmation:
			if strings.HasPrefix(strings.ToLower(line), "y") {
				return Answer{Value: Yes}, nil
			}
			return Answer{Value: No}, nil
		case MultipleChoice:
			if o, ok := MatchOption(line, q.Options); ok {
				return Answer{Value: o.Key, Selected: &o}, nil
			}
			return Answer{Value: line, Text: line}, nil
		}
		return Answer{Value: line, Text: line}, nil
	case <-timeout:
		fmt.Fprintln(c.Out)
		return Answer{Value: TimedOut}, nil
	case <-ctx.Done():
		return Answer{}, ctx.Err()
	}
}

// Inform prints the message.
func (c *Console) Inform(message, stage string) { fmt.Fprintf(c.Out, "[%s] %s\n", stage, message) }

// MatchOption finds the option an answer names: its key (any case), its
// label, or its label without the accelerator.
func MatchOption(answer string, opts []Option) (Option, bool) {
	a := strings.TrimSpace(answer)
	for _, o := range opts {
		if strings.EqualFold(o.Key, a) {
			return o, true
		}
	}
	for _, o := range opts {
		if strings.EqualFold(o.Label, a) || strings.EqualFold(stripAccelerator(o.Label), a) {
			return o, true
		}
	}
	return Option{}, false
}
