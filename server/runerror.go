package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/internal/metric"
	"github.com/nbots/nb/provider"
)

// runOutcomeKey finds a run's outcome in its context (Admit puts it).
type runOutcomeKey struct{}

// runOutcome is how a run went, as its front-end tells (RunFailed).
type runOutcome struct {
	mu  sync.Mutex
	ctx context.Context
	err error
}

// RunFailed tells the run of ctx (a context Admit returned, or one made
// from it) that it failed with err; the first error counts, and a ctx of
// no run is let be. When the run ends (Admit's done), what failed joins
// the last errors of the control page, in a few words of its kind (see
// runErrorText): never the error's own text, which may quote the user's
// messages or a tool's output (the log has it).
func RunFailed(ctx context.Context, err error) {
	o, _ := ctx.Value(runOutcomeKey{}).(*runOutcome)
	if o == nil || err == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err == nil {
		o.ctx, o.err = ctx, err
	}
}

// failure is the run's error for metric.StartRun's end: nil when it did
// not fail, or its client stopped it.
func (o *runOutcome) failure() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err == nil {
		return nil
	}
	if text := runErrorText(o.ctx, o.err); text != "" {
		return errors.New(text)
	}
	return nil
}

// runErrorText says what failed in a run, for the server's operator: the
// HTTP status the client got and the error's kind (a provider's status
// and error code, the run's deadline, a broken cartridge ...), never its
// free text. "" for a run its client stopped (nothing failed).
func runErrorText(ctx context.Context, err error) string {
	e := AsError(ctx, err)
	if e.Status == 499 {
		return ""
	}
	var (
		what string
		pe   *provider.Error
		pan  *bot.PanicError
		ce   *cartridge.Error
		be   *bot.BusyError
		se   *Error
	)
	cause := context.Cause(ctx)
	switch {
	case ctx.Err() != nil && errors.Is(cause, ErrRunTimeout):
		what = cause.Error() // the server's own words, with the limit's name
	case ctx.Err() != nil && errors.Is(cause, ErrShutdown):
		what = "stopped: " + ErrShutdown.Error()
	case errors.As(err, &pe):
		what = "provider " + metric.Label("provider", pe.Provider) + ": "
		if pe.Status == 0 {
			what += "no answer (" + metric.ErrorKind(err) + ")"
		} else {
			what += fmt.Sprintf("HTTP %d", pe.Status)
			if code := word(pe.Code); code != "" {
				what += " " + code
			}
		}
	case errors.As(err, &pan):
		what = "internal error: a panic, whose stack is in the log"
	case errors.As(err, &ce):
		what = "cartridge error"
		if ce.File != "" {
			what += " in " + word(filepath.Base(ce.File))
			if ce.Line > 0 {
				what += fmt.Sprintf(":%d", ce.Line)
			}
		}
		if k := word(ce.Key); k != "" {
			what += " at " + k
		}
	case errors.As(err, &be):
		what = "the conversation's state is busy with another run"
	case errors.As(err, &se) && word(se.Code) != "":
		what = word(se.Code)
	default:
		what = http.StatusText(e.Status) + " (the log has the message)"
	}
	if e.Status == 0 { // an error frame's code (agent runs)
		return "error " + what
	}
	return fmt.Sprintf("HTTP %d: %s", e.Status, what)
}

// word is s when it is a short code or name (letters, digits, _ . - : /
// [ ]), "" otherwise: what is not cannot be told from free text.
func word(s string) string {
	if len(s) > 80 {
		return ""
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-' || c == ':' || c == '/' || c == '[' || c == ']') {
			return ""
		}
	}
	return s
}
