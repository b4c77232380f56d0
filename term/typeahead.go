package term

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
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
	after  []string      // lines typed meanwhile that are for the prompt
	asking chan string   // set while a question waits for its line
	next   chan readItem // what the prompt reads
	// reading is held by watch while it reads, and by a question.
	reading sync.Mutex
}

type readItem struct {
	msg string
	err error
}

func newTypeahead(notes io.Writer) *typeahead {
	return &typeahead{notes: notes, next: make(chan readItem)}
}

// readFrom reads the messages with read (a plain terminal's lines) in a
// goroutine of its own, from now until the input ends.
func (t *typeahead) readFrom(read func(string) (string, error), more string) {
	t.read, t.more = read, more
	go t.loop()
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
	fmt.Fprintf(t.notes, "nb: queued: %s\n", oneLine(msg))
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
	if msg, ok := t.leftover(); ok {
		return msg, nil
	}
	it := <-t.next
	return it.msg, it.err
}

// leftover is what was typed during the last answer and not sent: the
// lines queued (one message), else a line that was not for the answer (an
// exit word, /status).
func (t *typeahead) leftover() (string, bool) {
	t.mu.Lock()
	left, after := t.queue, t.after
	t.queue = nil
	if len(left) == 0 && len(after) > 0 {
		t.after = after[1:]
	}
	t.mu.Unlock()
	switch {
	case len(left) > 0:
		msg := strings.Join(left, "\n\n")
		fmt.Fprintf(t.notes, "nb: sent: %s\n", oneLine(msg))
		return msg, true
	case len(after) > 0:
		return after[0], true
	}
	return "", false
}

// pollTick bounds each wait of watch for a line: how long after an
// answer ends the terminal is still read by it.
const pollTick = 50 * time.Millisecond

// watch reads the lines typed on in while an answer runs with the line
// editor idle (the terminal is then in its normal mode, which hands over
// a line when Enter is pressed), until the stop it returns is called;
// stop returns once nothing reads in any more, so the line editor gets
// every key typed after. Lines not for the answer (an exit word, /status)
// wait for the prompt. A question (see pause) stops the reading while it
// reads its answer itself.
func (t *typeahead) watch(in *os.File) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	fd := int(in.Fd())
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		var pending []byte
		for {
			select {
			case <-quit:
				return
			default:
			}
			t.reading.Lock()
			n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int(pollTick/time.Millisecond))
			if err == nil && n > 0 {
				if k, err := unix.Read(fd, buf); err == nil && k > 0 {
					pending = append(pending, buf[:k]...)
				}
			}
			t.reading.Unlock()
			if err != nil && err != unix.EINTR {
				return
			}
			for {
				i := bytes.IndexByte(pending, '\n')
				if i < 0 {
					break
				}
				line := strings.TrimRight(pasteMarks.Replace(string(pending[:i])), "\r")
				pending = pending[i+1:]
				if !t.take(line) {
					t.mu.Lock()
					t.after = append(t.after, line)
					t.mu.Unlock()
				}
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

// pasteMarks are the bracketed paste marks a paste brings while the line
// editor is idle.
var pasteMarks = strings.NewReplacer(pasteStart, "", pasteEnd, "")

// pausing is a LineReader that stops watch's reading while it asks.
type pausing struct {
	t     *typeahead
	inner LineReader
}

func (p pausing) ReadLine(ctx context.Context, prompt string) (string, error) {
	p.t.reading.Lock()
	defer p.t.reading.Unlock()
	return p.inner.ReadLine(ctx, prompt)
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
