package term

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

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
}

// Confirm implements agent.Confirmer.
func (c *Confirmer) Confirm(ctx context.Context, call tool.Call, text string) (string, bool) {
	prompt := c.Printer.Feedback("confirming", text)
	if c.Reader != nil {
		line, err := c.Reader.ReadLine(ctx, prompt)
		if err != nil {
			return "", false
		}
		return line, true
	}
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		fmt.Fprintf(c.Stderr, "nb: no terminal to ask whether %s may run: the call is denied (set safety.tools.confirmable: false in the cartridge to run tools without asking)\n", call.Name)
		return "", false
	}
	defer tty.Close()
	line, err := (&ttyReader{f: tty}).ReadLine(ctx, prompt)
	if err != nil {
		return "", false
	}
	return line, true
}

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
