package provider

import "strings"

// ThinkFilter separates a leading <think>...</think> block, which some
// reasoning models put in the answer text, from the visible answer. Feed it
// the text deltas in order; tags split across deltas are handled.
type ThinkFilter struct {
	state   int // 0: before any visible text, 1: inside think, 2: visible, 3: just after </think>
	pending string
}

const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// Feed takes the next delta and returns what is visible and what is reasoning.
func (f *ThinkFilter) Feed(delta string) (visible, reasoning string) {
	s := f.pending + delta
	f.pending = ""
	for s != "" {
		switch f.state {
		case 0:
			trimmed := strings.TrimLeft(s, " \t\r\n")
			if trimmed == "" {
				f.pending = s
				return visible, reasoning
			}
			if strings.HasPrefix(trimmed, thinkOpen) {
				f.state = 1
				s = trimmed[len(thinkOpen):]
				continue
			}
			if strings.HasPrefix(thinkOpen, trimmed) {
				f.pending = s // could still become <think>
				return visible, reasoning
			}
			f.state = 2
		case 1:
			if i := strings.Index(s, thinkClose); i >= 0 {
				reasoning += s[:i]
				s = s[i+len(thinkClose):]
				f.state = 3
				continue
			}
			keep := partialSuffix(s, thinkClose)
			reasoning += s[:len(s)-keep]
			f.pending = s[len(s)-keep:]
			return visible, reasoning
		case 2:
			return visible + s, reasoning
		case 3: // the newlines after </think> are not part of the answer
			s = strings.TrimLeft(s, "\r\n")
			if s != "" {
				f.state = 2
			}
		}
	}
	return visible, reasoning
}

// Flush returns what is held back at the end of the stream.
func (f *ThinkFilter) Flush() (visible, reasoning string) {
	p := f.pending
	f.pending = ""
	if f.state == 1 {
		return "", p
	}
	return p, ""
}

// partialSuffix is the length of the longest suffix of s that is a proper
// prefix of tag.
func partialSuffix(s, tag string) int {
	for n := min(len(tag)-1, len(s)); n > 0; n-- {
		if strings.HasSuffix(s, tag[:n]) {
			return n
		}
	}
	return 0
}

// TextBuffer accumulates streamed text. It keeps the pieces and joins
// them once at the end, which costs one copy of a long answer instead of
// the repeated growth of a strings.Builder.
type TextBuffer struct {
	pieces []string
	n      int
}

// WriteString adds a piece.
func (b *TextBuffer) WriteString(s string) {
	if s != "" {
		b.pieces = append(b.pieces, s)
		b.n += len(s)
	}
}

// Len is the length of the text so far.
func (b *TextBuffer) Len() int { return b.n }

// String returns the whole text.
func (b *TextBuffer) String() string {
	if len(b.pieces) == 1 {
		return b.pieces[0]
	}
	var sb strings.Builder
	sb.Grow(b.n)
	for _, p := range b.pieces {
		sb.WriteString(p)
	}
	b.pieces = append(b.pieces[:0], sb.String())
	return b.pieces[0]
}

// SplitThink separates a leading <think> block of a whole (not streamed)
// answer from its visible text.
func SplitThink(s string) (visible, reasoning string) {
	var f ThinkFilter
	visible, reasoning = f.Feed(s)
	v, r := f.Flush()
	return visible + v, reasoning + r
}

// Answer gathers a streamed answer as it arrives: the visible text, with
// a leading <think> block turned into reasoning, and the reasoning the
// provider sends in its own fields. Each piece goes to Emit at once.
type Answer struct {
	// Emit receives the pieces; nil drops them.
	Emit func(Event)
	// Streamed is set once visible text has been added.
	Streamed bool

	think     ThinkFilter
	text      TextBuffer
	reasoning strings.Builder
}

// Content adds a piece of answer text.
func (a *Answer) Content(s string) {
	if s == "" {
		return
	}
	visible, thought := a.think.Feed(s)
	a.Reasoning(thought)
	a.visible(visible)
}

// Reasoning adds a piece of reasoning.
func (a *Answer) Reasoning(s string) {
	if s != "" {
		a.reasoning.WriteString(s)
		a.emit(Event{Kind: ReasoningDelta, Text: s})
	}
}

func (a *Answer) visible(s string) {
	if s != "" {
		a.text.WriteString(s)
		a.Streamed = true
		a.emit(Event{Kind: TextDelta, Text: s})
	}
}

func (a *Answer) emit(ev Event) {
	if a.Emit != nil {
		a.Emit(ev)
	}
}

// Finish releases what the <think> filter held back at the end of the
// stream and stores the text and the reasoning in resp.
func (a *Answer) Finish(resp *Response) {
	visible, thought := a.think.Flush()
	a.reasoning.WriteString(thought)
	a.visible(visible)
	resp.Text = a.text.String()
	resp.Reasoning = a.reasoning.String()
}

// Incomplete is the error of a stream that ended before the provider's
// end-of-answer event.
func Incomplete(providerID string, streamed bool) *Error {
	return &Error{Provider: providerID, Message: "the stream ended before the answer was complete", Streamed: streamed, Retryable: !streamed}
}
