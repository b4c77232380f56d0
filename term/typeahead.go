package term

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
)

// typeahead reads the user's messages in a goroutine of its own while the
// REPL runs, so a line typed while an answer runs is taken at once: it is
// queued (and shown as queued), given to the model after the current
// round of tool calls (Steering, shown as sent), or, when the answer ends
// first, sent as the next message. It is never lost and never sent twice.
// A question (a tool confirmation) takes the next line itself.
type typeahead struct {
	read func(prompt string) (string, error)
	more string
	// notes receives the queued and sent notes.
	notes io.Writer

	mu     sync.Mutex
	busy   bool          // an exchange runs
	queue  []string      // lines typed meanwhile, not yet sent
	asking chan string   // set while a question waits for its line
	next   chan readItem // what the prompt reads
}

type readItem struct {
	msg string
	err error
}

func newTypeahead(read func(string) (string, error), more string, notes io.Writer) *typeahead {
	t := &typeahead{read: read, more: more, notes: notes, next: make(chan readItem)}
	go t.loop()
	return t
}

// loop reads messages until the input ends. The prompt is the REPL's to
// show (see wait): a read started while an answer runs has none.
func (t *typeahead) loop() {
	for {
		msg, err := readMessage(t.read, "", t.more)
		if err == nil && t.take(msg) {
			continue
		}
		t.next <- readItem{msg, err}
		if err != nil {
			return
		}
	}
}

// take gives msg to a waiting question, or queues it while an exchange
// runs; false leaves it for the prompt.
func (t *typeahead) take(msg string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.asking != nil {
		t.asking <- msg
		t.asking = nil
		return true
	}
	trimmed := strings.TrimSpace(msg)
	if exitWords[trimmed] || trimmed == StatusCommand {
		return false
	}
	if !t.busy {
		// The prompt takes it and an exchange starts: what comes next
		// is for that exchange, even before it has begun.
		t.busy = trimmed != ""
		return false
	}
	if trimmed == "" {
		return true
	}
	t.queue = append(t.queue, msg)
	fmt.Fprintf(t.notes, "nb: queued (sent after the current tool round): %s\n", oneLine(msg))
	return true
}

// setBusy marks an exchange running or over.
func (t *typeahead) setBusy(busy bool) {
	t.mu.Lock()
	t.busy = busy
	t.mu.Unlock()
}

// Steering gives the running exchange the lines queued meanwhile.
func (t *typeahead) Steering() []string {
	t.mu.Lock()
	msgs := t.queue
	t.queue = nil
	t.mu.Unlock()
	for _, m := range msgs {
		fmt.Fprintf(t.notes, "nb: sent: %s\n", oneLine(m))
	}
	return msgs
}

// wait returns the next message for the prompt: what was queued and not
// sent before the last answer ended (one message), else the next one
// typed.
func (t *typeahead) wait() (string, error) {
	t.mu.Lock()
	left := t.queue
	t.queue = nil
	t.mu.Unlock()
	if len(left) > 0 {
		msg := strings.Join(left, "\n\n")
		fmt.Fprintf(t.notes, "nb: sent: %s\n", oneLine(msg))
		return msg, nil
	}
	it := <-t.next
	return it.msg, it.err
}

// ReadLine implements LineReader: a question takes the next line typed.
func (t *typeahead) ReadLine(ctx context.Context, prompt string) (string, error) {
	ch := make(chan string, 1)
	t.mu.Lock()
	t.asking = ch
	t.mu.Unlock()
	io.WriteString(t.notes, prompt) //nolint:errcheck // a terminal
	select {
	case line := <-ch:
		io.WriteString(t.notes, "\n") //nolint:errcheck // the reference's blank line after the answer
		return line, nil
	case <-ctx.Done():
		t.mu.Lock()
		if t.asking == ch {
			t.asking = nil
		}
		t.mu.Unlock()
		return "", ctx.Err()
	}
}

// oneLine shortens a message for a note.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 60 {
		s = string(r[:60]) + "…"
	}
	return s
}
