package term

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

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
	// Stdin and Stderr; Printer.W is stdout.
	Stdin  *os.File
	Stderr io.Writer
	// HistoryFile keeps the lines typed, per cartridge; "" keeps none.
	HistoryFile string
	// Prompt is the rendered prompt.
	Prompt string
	// ReportError prints a failed exchange; the loop goes on.
	ReportError func(error)
}

// exitWords leave the REPL, as in the reference (quit does not: it is
// sent to the bot).
var exitWords = map[string]bool{"exit": true, "exit-all": true, "exit-program": true}

// Run reads lines until end of input or an exit word. With a terminal on
// stdin it edits lines, keeps history and shows the prompt; Ctrl-C stops
// the answer being streamed and returns to the prompt. With piped stdin
// it reads one message a line and prints no prompt.
func (r *REPL) Run(ctx context.Context) error {
	interactive := IsTerminal(r.Stdin)
	var rl *readline.Instance
	var read func() (string, error)
	if interactive {
		if r.HistoryFile != "" {
			privateHistory(r.HistoryFile)
		}
		var err error
		rl, err = readline.NewFromConfig(&readline.Config{
			Prompt:            r.Prompt,
			HistoryFile:       r.HistoryFile,
			HistorySearchFold: true,
			InterruptPrompt:   "^C",
			Stdin:             r.Stdin,
			Stdout:            r.Printer.W,
			Stderr:            r.Stderr,
		})
		if err != nil {
			return fmt.Errorf("start the REPL: %w", err)
		}
		defer rl.Close()
		r.Printer.W = rl.Stdout()
		if r.Confirmer != nil {
			r.Confirmer.Reader = &readlineReader{rl: rl}
		}
		read = func() (string, error) {
			for {
				line, err := rl.Readline()
				if errors.Is(err, readline.ErrInterrupt) {
					continue // Ctrl-C at the prompt clears the line
				}
				return line, err
			}
		}
	} else {
		sc := bufio.NewScanner(r.Stdin)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		read = func() (string, error) {
			if !sc.Scan() {
				if err := sc.Err(); err != nil {
					return "", err
				}
				return "", io.EOF
			}
			return strings.TrimRight(sc.Text(), "\r"), nil
		}
	}

	if r.Session.HasBoot() {
		r.exchange(ctx, interactive, func(ctx context.Context) error {
			_, err := r.Session.Boot(ctx)
			return err
		})
	}
	for {
		if ctx.Err() != nil {
			return nil
		}
		line, err := read()
		if err != nil {
			if errors.Is(err, io.EOF) {
				if interactive {
					io.WriteString(r.Printer.W, "\n") //nolint:errcheck // leave the prompt's line
				}
				return nil
			}
			return err
		}
		if exitWords[strings.TrimSpace(line)] {
			return nil
		}
		if strings.TrimSpace(line) == "" {
			continue
		}
		r.exchange(ctx, interactive, func(ctx context.Context) error {
			_, err := r.Session.Ask(ctx, line)
			return err
		})
	}
}

// exchange prints the output prefix, runs one exchange, prints the suffix
// and a newline. In a terminal, Ctrl-C cancels the exchange only.
func (r *REPL) exchange(ctx context.Context, interactive bool, run func(context.Context) error) {
	if interactive {
		var stop context.CancelFunc
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt)
		defer stop()
	}
	r.Printer.Prefix()
	err := run(ctx)
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
