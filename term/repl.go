package term

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ergochat/readline"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/media"
)

// Session is the conversation a REPL holds (bot.Session).
type Session interface {
	Ask(ctx context.Context, input string, images ...media.Image) (*agent.Result, error)
	Boot(ctx context.Context) (*agent.Result, error)
	HasBoot() bool
}

// REPL is the interactive loop of a cartridge.
type REPL struct {
	Session Session
	// Confirmer, when set, reads its answers through the REPL's line
	// editor, so the two never compete for the terminal.
	Confirmer *Confirmer
	Printer   *Printer
	// Stdin, Stdout and Stderr; Printer.W writes to Stdout.
	Stdin, Stdout *os.File
	Stderr        io.Writer
	// Term is the TERM variable: "dumb" means plain line input.
	Term string
	// HistoryFile keeps the lines typed, per cartridge; "" keeps none.
	HistoryFile string
	// Prompt is the rendered prompt; PlainPrompt the same without colour.
	Prompt, PlainPrompt string
	// ReportError prints a failed exchange; the loop goes on.
	ReportError func(error)
	// Interrupts, when set, is called while the REPL reads a terminal:
	// it returns the channel on which Ctrl-C (SIGINT) arrives instead of
	// stopping the program (the program's one signal handler routes it
	// there), and the function that gives it back. Each Ctrl-C stops the
	// answer running; one pressed at the prompt is not for the next
	// answer. Nil: Ctrl-C is not watched.
	Interrupts func() (<-chan os.Signal, func())
	// probe replaces ProbeCursor in tests.
	probe func(in, out *os.File, timeout time.Duration) (bool, []byte)
	// typeahead reads lines while answers run; watch is set when it
	// does so only during answers (the line editor reads at the prompt).
	typeahead *typeahead
	watch     bool
}

// Steering gives the running exchange the lines the user typed while it
// ran (bot.Exchange.Steering): after the current round of tool calls the
// model reads them. Piped input is read one message at a time, never
// meanwhile.
func (r *REPL) Steering() []string {
	if r.typeahead == nil {
		return nil
	}
	return r.typeahead.Steering()
}

// exitWords leave the REPL. The reference sent quit to the bot; people
// type it to leave, so it leaves too.
var exitWords = map[string]bool{"exit": true, "quit": true, "exit-all": true, "exit-program": true}

// continuation ends a line that goes on on the next one: a message of
// several lines typed on purpose ("first line \" Enter "second line").
const continuation = "\\"

// InputMode is how the REPL reads lines.
type InputMode int

// Input modes.
const (
	// Piped: stdin is not a terminal; one message a line, no prompt.
	Piped InputMode = iota
	// Plain: a terminal that cannot be edited in (stdout redirected, TERM
	// dumb, or no answer to the cursor query): plain lines, plain prompt.
	Plain
	// Editor: the line editor, with history, colour and bracketed paste.
	Editor
)

// Mode decides how lines are read: the line editor needs stdin and
// stdout on a terminal that is not dumb and that answers a cursor
// position query within a bounded wait (the editor sends one before
// every prompt and would wait forever). typed is what the user typed
// during the query.
func (r *REPL) Mode() (mode InputMode, typed []byte) {
	if !IsTerminal(r.Stdin) {
		return Piped, nil
	}
	if !IsTerminal(r.Stdout) || r.Term == "dumb" || r.Term == "" {
		return Plain, nil
	}
	probe := r.probe
	if probe == nil {
		probe = ProbeCursor
	}
	answered, typed := probe(r.Stdin, r.Stdout, probeTimeout)
	if !answered {
		fmt.Fprintln(r.Stderr, "nb: the terminal does not answer cursor queries: plain line input (no line editing)")
		return Plain, typed
	}
	return Editor, typed
}

// Run reads messages until end of input or an exit word. In the line
// editor a paste is one message; Ctrl-C stops the answer being streamed
// and returns to the prompt. A line ending in a backslash goes on on the
// next line. With piped stdin it reads one message a line and prints no
// prompt. When ctx ends (SIGTERM), the answer running stops and Run
// returns ctx's cause, at the prompt too.
func (r *REPL) Run(ctx context.Context) error {
	mode, typed := r.Mode()
	var read func(prompt string) (string, error)
	prompt, more := r.Prompt, "... "
	switch mode {
	case Editor:
		if r.HistoryFile != "" {
			privateHistory(r.HistoryFile)
		}
		var in io.Reader = r.Stdin
		if len(typed) > 0 {
			in = &prefixReader{prefix: typed, r: in}
		}
		rl, err := readline.NewFromConfig(&readline.Config{
			Prompt:            r.Prompt,
			HistoryFile:       r.HistoryFile,
			HistorySearchFold: true,
			InterruptPrompt:   "^C",
			Stdin:             newPasteReader(in),
			Stdout:            r.Printer.W,
			Stderr:            r.Stderr,
		})
		if err != nil {
			return fmt.Errorf("start the REPL: %w", err)
		}
		defer rl.Close()
		io.WriteString(r.Printer.W, pasteOn)        //nolint:errcheck // a terminal
		defer io.WriteString(r.Printer.W, pasteOff) //nolint:errcheck // a terminal
		r.Printer.W = rl.Stdout()
		if r.Confirmer != nil {
			r.Confirmer.Reader = &readlineReader{rl: rl}
		}
		read = func(p string) (line string, err error) {
			defer func() {
				// The editor panics on 128 KiB of input while it waits for
				// a cursor report that never comes: end the REPL cleanly.
				if v := recover(); v != nil {
					line, err = "", fmt.Errorf("the line editor failed (%v): run with TERM=dumb for plain input", v)
				}
			}()
			rl.SetPrompt(p)
			for {
				line, err := rl.Readline()
				if errors.Is(err, readline.ErrInterrupt) {
					continue // Ctrl-C at the prompt clears the line
				}
				return strings.ReplaceAll(line, string(PastedNewline), "\n"), err
			}
		}
	default:
		prompt, more = r.PlainPrompt, "... "
		if mode == Piped {
			prompt, more = "", ""
		}
		sc := bufio.NewScanner(io.MultiReader(bytes.NewReader(typed), r.Stdin))
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		read = func(p string) (string, error) {
			io.WriteString(r.Printer.W, p) //nolint:errcheck // a terminal or a file
			if !sc.Scan() {
				if err := sc.Err(); err != nil {
					return "", err
				}
				return "", io.EOF
			}
			return strings.TrimRight(sc.Text(), "\r"), nil
		}
	}
	// In a terminal, Ctrl-C stops an answer; at a plain prompt it is
	// ignored (the line editor reads it as a key).
	var interrupts <-chan os.Signal
	if mode != Piped && r.Interrupts != nil {
		var release func()
		interrupts, release = r.Interrupts()
		defer release()
	}
	interactive := mode != Piped
	switch mode {
	case Plain:
		// A goroutine reads every line; the prompt, the running answer
		// and its questions take them from it.
		typed := newTypeahead(r.Stderr)
		typed.readFrom(read, more)
		r.typeahead = typed
		if r.Confirmer != nil {
			r.Confirmer.Reader = typed
		}
		read = func(p string) (string, error) {
			io.WriteString(r.Printer.W, p) //nolint:errcheck // a terminal or a file
			return typed.wait()
		}
		more = ""
	case Editor:
		// The line editor reads at the prompt; while an answer runs,
		// exchange has watch read the lines typed.
		typed := newTypeahead(r.Stderr)
		r.typeahead, r.watch = typed, true
		if r.Confirmer != nil {
			r.Confirmer.Reader = pausing{t: typed, inner: r.Confirmer.Reader}
		}
		edit := read
		read = func(p string) (string, error) {
			if msg, ok := typed.leftover(); ok {
				io.WriteString(r.Printer.W, p+msg+"\n") //nolint:errcheck // a terminal
				return msg, nil
			}
			return edit(p)
		}
	}

	if r.Session.HasBoot() {
		r.exchange(ctx, interrupts, func(ctx context.Context) error {
			res, err := r.Session.Boot(ctx)
			r.notice(res)
			return err
		})
	}
	read = readUntil(ctx, read)
	for {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		message, err := readMessage(read, prompt, more)
		if err != nil {
			if errors.Is(err, io.EOF) {
				if interactive {
					io.WriteString(r.Printer.W, "\n") //nolint:errcheck // leave the prompt's line
				}
				return nil
			}
			return err
		}
		if exitWords[strings.TrimSpace(message)] {
			return nil
		}
		if strings.TrimSpace(message) == "" {
			continue
		}
		if strings.TrimSpace(message) == StatusCommand {
			fmt.Fprintln(r.Stderr, r.Printer.Figures())
			continue
		}
		r.exchange(ctx, interrupts, func(ctx context.Context) error {
			res, err := r.Session.Ask(ctx, message)
			r.notice(res)
			return err
		})
	}
}

// readUntil is read, returning ctx's cause when ctx ends first: the
// read left blocked ends with the program.
func readUntil(ctx context.Context, read func(string) (string, error)) func(string) (string, error) {
	type line struct {
		s   string
		err error
	}
	return func(p string) (string, error) {
		got := make(chan line, 1)
		go func() {
			s, err := read(p)
			got <- line{s, err}
		}()
		select {
		case l := <-got:
			return l.s, l.err
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
	}
}

// StatusCommand, typed alone at the prompt, shows the context's size
// against its budget and the tokens used so far, instead of sending it.
const StatusCommand = "/status"

// notice shows why an exchange stopped without an answer (a limit), and
// how to go on: the conversation is kept and the prompt comes back.
func (r *REPL) notice(res *agent.Result) {
	if res != nil && res.Notice != "" {
		r.Printer.EndStatus()
		fmt.Fprintln(r.Stderr, "\nnb: "+res.Notice)
	}
}

// readMessage reads one message: a line, or several when each but the
// last ends with a backslash (which is removed).
func readMessage(read func(prompt string) (string, error), prompt, more string) (string, error) {
	var lines []string
	p := prompt
	for {
		line, err := read(p)
		if err != nil {
			if len(lines) > 0 && errors.Is(err, io.EOF) {
				return strings.Join(append(lines, line), "\n"), nil
			}
			return "", err
		}
		body, goesOn := strings.CutSuffix(line, continuation)
		if !goesOn {
			return strings.Join(append(lines, line), "\n"), nil
		}
		lines = append(lines, body)
		p = more
	}
}

// exchange prints the output prefix, runs one exchange, prints the suffix
// and a newline. In a terminal, Ctrl-C cancels the exchange only.
func (r *REPL) exchange(ctx context.Context, interrupts <-chan os.Signal, run func(context.Context) error) {
	if interrupts != nil {
		// A Ctrl-C pressed at the prompt is not for this exchange.
		select {
		case <-interrupts:
		default:
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		done := make(chan struct{})
		defer close(done)
		go func() {
			select {
			case <-interrupts:
				cancel()
			case <-done:
			}
		}()
	}
	if r.typeahead != nil {
		r.typeahead.setBusy(true)
		defer r.typeahead.setBusy(false)
		if r.watch {
			defer r.typeahead.watch(r.Stdin)()
		}
	}
	r.Printer.Prefix()
	err := run(ctx)
	r.Printer.EndStatus()
	if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, ErrInterrupted)) {
		io.WriteString(r.Printer.W, "\n(answer stopped)") //nolint:errcheck // cosmetic
		err = nil
	}
	r.Printer.Suffix()
	io.WriteString(r.Printer.W, "\n") //nolint:errcheck // cosmetic
	if err != nil && r.ReportError != nil {
		r.ReportError(err)
	}
}

// readlineReader reads confirmations through the REPL's line editor, so
// it and the confirmation never compete for the terminal.
type readlineReader struct {
	rl *readline.Instance
}

func (r *readlineReader) ReadLine(ctx context.Context, prompt string) (string, error) {
	cfg := r.rl.GeneratePasswordConfig() // the instance's terminal, no history
	cfg.EnableMask = false
	cfg.Prompt = prompt
	cfg.DisableAutoSaveHistory = true
	line, err := r.rl.ReadLineWithConfig(cfg)
	if errors.Is(err, readline.ErrInterrupt) {
		return "", ErrInterrupted
	}
	if err == nil {
		io.WriteString(r.rl.Stdout(), "\n") //nolint:errcheck // the reference's blank line after the answer
	}
	return line, err
}

// privateHistory makes the history file and its folder readable by their
// owner only before the line editor opens it: it creates the file 0666
// (0644 under the usual umask) and rewrites it through a .tmp file in the
// same folder. History is a convenience, so failures are ignored.
func privateHistory(path string) {
	dir := filepath.Dir(path)
	os.MkdirAll(dir, 0o700) //nolint:errcheck // see above
	os.Chmod(dir, 0o700)    //nolint:errcheck // nb's own folder, perhaps made by an older nb
	if f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o600); err == nil {
		f.Close()
	}
	os.Chmod(path, 0o600) //nolint:errcheck // see above
}
