package term

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/nbots/nb/tool"
)

// LineReader reads one line of a user's answer, showing prompt first.
type LineReader interface {
	ReadLine(ctx context.Context, prompt string) (string, error)
}

// Confirmer asks for tool confirmations. The answer comes from the user's
// terminal even when stdin is a pipe (it is /dev/tty); with no terminal at
// all the call is denied and a line on stderr says so.
type Confirmer struct {
	Printer *Printer
	// Reader reads the answer; nil opens /dev/tty for each question.
	Reader LineReader
	// Stderr receives the notice when there is no terminal.
	Stderr io.Writer
	// Approval is what the user approved beforehand (--yes,
	// --allow-tool) and, as the session goes, by answering "a" (always);
	// nil approves nothing beforehand and remembers nothing.
	Approval *Approval
}

// Approval is what a user approved without being asked each time: every
// call (All), or every call of some tools.
type Approval struct {
	All bool
	mu  sync.Mutex
	// tools are approved tool names.
	tools map[string]bool
}

// Allow approves every call of the tool name.
func (a *Approval) Allow(name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.tools == nil {
		a.tools = map[string]bool{}
	}
	a.tools[name] = true
}

// Allows reports whether calls of name were approved.
func (a *Approval) Allows(name string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.All || a.tools[name]
}

// Clone returns a copy: each session keeps its own "always" answers.
func (a *Approval) Clone() *Approval {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := &Approval{All: a.All}
	for name := range a.tools {
		c.Allow(name)
	}
	return c
}

// always are the answers that approve a tool for the rest of the session.
func always(answer string) bool {
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "a", "always":
		return true
	}
	return false
}

// Confirm implements agent.Confirmer: the user's answer allows the call
// when the cartridge's yes-words say so. Ctrl-C at the question stops the
// exchange (an error); end of input is "no".
func (c *Confirmer) Confirm(ctx context.Context, call tool.Call, text string) (bool, error) {
	if c.Approval != nil && c.Approval.Allows(call.Name) {
		return true, nil
	}
	prompt := c.Printer.Feedback("confirming", text)
	reader := c.Reader
	if reader == nil {
		tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
		if err != nil {
			fmt.Fprintf(c.Stderr, "nb: no terminal to ask whether %s may run: the call is denied (set safety.tools.confirmable: false in the cartridge to run tools without asking)\n", call.Name)
			return false, nil
		}
		defer tty.Close()
		reader = &ttyReader{f: tty}
	}
	line, err := reader.ReadLine(ctx, prompt)
	switch {
	case ctx.Err() != nil:
		return false, ctx.Err()
	case errors.Is(err, ErrInterrupted):
		return false, err
	case err != nil:
		return false, nil
	}
	if always(line) && c.Approval != nil {
		c.Approval.Allow(call.Name)
		return true, nil
	}
	return c.Printer.Cartridge.Allows(c.Printer.Mode, line), nil
}

// ErrInterrupted is returned by a LineReader when the user pressed Ctrl-C
// at the question: the exchange stops.
var ErrInterrupted = errors.New("interrupted at a confirmation")

type ttyReader struct{ f *os.File }

// ReadLine writes the prompt to the terminal and reads one line from it;
// a newline follows the answer, as the reference prints.
func (r *ttyReader) ReadLine(ctx context.Context, prompt string) (string, error) {
	io.WriteString(r.f, prompt) //nolint:errcheck // the read reports a broken terminal
	type result struct {
		line string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		line, err := bufio.NewReader(r.f).ReadString('\n')
		done <- result{line, err}
	}()
	select {
	case <-ctx.Done():
		r.f.Close()
		return "", ctx.Err()
	case res := <-done:
		io.WriteString(r.f, "\n") //nolint:errcheck // cosmetic
		if res.err != nil && res.line == "" {
			return "", res.err
		}
		return strings.TrimRight(res.line, "\r\n"), nil
	}
}
