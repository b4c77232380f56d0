package handler

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/nbots/nb/pipeline/engine"
)

// WaitHuman is §4.6's handler: the node's outgoing edges are the
// choices (each edge's label, else its target), asked through the
// Interviewer with the node's timeout (D17). The answer sets both
// suggested_next_ids and preferred_label (D4), and the context's
// human.gate.selected and human.gate.label.
type WaitHuman struct {
	Interviewer Interviewer
}

type choice struct {
	key, label, to string
}

var (
	bracketKey = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\[([^\]\s]+)\]\s*`) })
	parenKey   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([A-Za-z0-9])\)\s+`) })
	dashKey    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^([A-Za-z0-9])\s+-\s+`) })
)

// AcceleratorKey is §4.6's key of a label: K of "[K] L", "K) L" or
// "K - L", else the first character.
func AcceleratorKey(label string) string {
	l := strings.TrimSpace(label)
	for _, re := range []*regexp.Regexp{bracketKey(), parenKey(), dashKey()} {
		if m := re.FindStringSubmatch(l); m != nil {
			return m[1]
		}
	}
	if r, size := utf8.DecodeRuneInString(l); size > 0 && r != utf8.RuneError {
		return string(r)
	}
	return ""
}

func stripAccelerator(label string) string {
	l := strings.TrimSpace(label)
	for _, re := range []*regexp.Regexp{bracketKey(), parenKey(), dashKey()} {
		if loc := re.FindStringIndex(l); loc != nil {
			return strings.TrimSpace(l[loc[1]:])
		}
	}
	return l
}

// Execute asks the question and routes on the answer.
func (h *WaitHuman) Execute(ctx context.Context, s *engine.Stage) (engine.Outcome, error) {
	var choices []choice
	for _, e := range s.Graph.Outgoing(s.Node.ID) {
		label := e.Label()
		if label == "" {
			label = e.To
		}
		choices = append(choices, choice{key: AcceleratorKey(label), label: label, to: e.To})
	}
	if len(choices) == 0 {
		return engine.Failf("No outgoing edges for human gate"), nil
	}
	q := Question{ID: s.Node.ID + "-" + itoa(s.Attempt), Text: s.Node.Label(), Type: MultipleChoice, Stage: s.Node.ID, Timeout: s.Node.Timeout()}
	if q.Text == "" {
		q.Text = "Select an option:"
	}
	if v := s.Node.Str("human.channel", ""); v != "" {
		// The chat to ask in (package pipeline/chatgate).
		q.Metadata = map[string]any{"human.channel": v}
	}
	for _, c := range choices {
		q.Options = append(q.Options, Option{Key: c.key, Label: c.label})
	}
	def := s.Node.Str("human.default_choice", "")
	if def != "" {
		for _, c := range choices {
			if c.to == def {
				q.Default = &Answer{Value: c.key, Selected: &Option{Key: c.key, Label: c.label}}
			}
		}
	}
	iv := h.Interviewer
	if iv == nil {
		iv = AutoApprove{}
	}
	began := s.Now()
	s.Emit(engine.Event{Kind: engine.InterviewStarted, Question: q.Text, Stage: s.Node.ID})
	a, err := iv.Ask(ctx, q)
	if err != nil {
		return engine.Outcome{}, err
	}
	d := s.Now().Sub(began)
	var selected *choice
	switch a.Value {
	case TimedOut:
		s.Emit(engine.Event{Kind: engine.InterviewTimeout, Question: q.Text, Stage: s.Node.ID, Duration: float64(d.Microseconds()) / 1000})
		if def == "" {
			return engine.Outcome{Status: engine.Retry, FailureReason: "human gate timeout, no default"}, nil
		}
		for i := range choices {
			if choices[i].to == def {
				selected = &choices[i]
			}
		}
		if selected == nil {
			return engine.Failf("human gate timeout: human.default_choice %q is not a target of %s's edges", def, s.Node.ID), nil
		}
	case SkipIt:
		s.Emit(engine.Event{Kind: engine.InterviewCompleted, Question: q.Text, Answer: a.Value, Stage: s.Node.ID, Duration: float64(d.Microseconds()) / 1000})
		return engine.Failf("human skipped interaction"), nil
	default:
		s.Emit(engine.Event{Kind: engine.InterviewCompleted, Question: q.Text, Answer: a.Value, Stage: s.Node.ID, Duration: float64(d.Microseconds()) / 1000})
		selected = match(a, choices)
	}
	return engine.Outcome{Status: engine.Success, SuggestedNextIDs: []string{selected.to}, PreferredLabel: selected.label,
		ContextUpdates: map[string]any{"human.gate.selected": selected.key, "human.gate.label": selected.label}}, nil
}

// match finds the choice an answer names (its selected option, or its
// value as a key, label or target); an answer that names none takes the
// first choice (§4.6).
func match(a Answer, choices []choice) *choice {
	want := []string{a.Value, a.Text}
	if a.Selected != nil {
		want = append([]string{a.Selected.Key, a.Selected.Label}, want...)
	}
	for _, w := range want {
		w = strings.TrimSpace(w)
		if w == "" {
			continue
		}
		for i := range choices {
			c := &choices[i]
			if strings.EqualFold(c.key, w) || strings.EqualFold(c.label, w) || c.to == w || strings.EqualFold(stripAccelerator(c.label), w) {
				return c
			}
		}
	}
	return &choices[0]
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}
