package main

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// signalError ends a run stopped by a signal.
type signalError struct{ sig os.Signal }

func (e *signalError) Error() string { return "stopped by " + e.sig.String() }

// ExitCode is the status of a command stopped by the signal: 128 plus
// its number, as shells report it.
func (e *signalError) ExitCode() int {
	if e.sig == syscall.SIGTERM {
		return exitTerminated
	}
	return exitInterrupt
}

// signals is nb's one handler of SIGINT and SIGTERM, installed by Main
// for the whole run. The first signal cancels the run's context (Context)
// with a *signalError as its cause, which every command is given and
// which picks the exit code (see App.report). While a REPL reading a
// terminal holds the interrupts (Interrupts), SIGINT goes to it instead:
// Ctrl-C stops the answer, not nb. A signal after the context ended
// closes Again (nb agents run: the first stops the run on the server, a
// second leaves without waiting for it).
type signals struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	ch     chan os.Signal
	quit   chan struct{}
	done   chan struct{}

	mu        sync.Mutex
	claim     chan os.Signal
	again     chan struct{}
	againOnce sync.Once
}

// watchSignals installs the handler.
func watchSignals() *signals {
	ctx, cancel := context.WithCancelCause(context.Background())
	s := &signals{ctx: ctx, cancel: cancel, ch: make(chan os.Signal, 1), quit: make(chan struct{}), done: make(chan struct{}), again: make(chan struct{})}
	signal.Notify(s.ch, os.Interrupt, syscall.SIGTERM)
	go s.loop()
	return s
}

func (s *signals) loop() {
	defer close(s.done)
	for {
		select {
		case sig := <-s.ch:
			s.deliver(sig)
		case <-s.quit:
			return
		}
	}
}

// deliver gives sig to the REPL holding the interrupts, or ends the run.
func (s *signals) deliver(sig os.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case sig == os.Interrupt && s.claim != nil && s.ctx.Err() == nil:
		select {
		case s.claim <- sig:
		default: // one waiting is enough
		}
	case s.ctx.Err() != nil:
		s.againOnce.Do(func() { close(s.again) })
	default:
		s.cancel(&signalError{sig: sig})
	}
}

// Context is the run's: cancelled by the first signal, its cause a
// *signalError.
func (s *signals) Context() context.Context { return s.ctx }

// Again is closed by a signal that comes after the first.
func (s *signals) Again() <-chan struct{} { return s.again }

// Interrupts routes SIGINT to the returned channel until release is
// called (term.REPL.Interrupts).
func (s *signals) Interrupts() (<-chan os.Signal, func()) {
	ch := make(chan os.Signal, 1)
	s.mu.Lock()
	prev := s.claim
	s.claim = ch
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		s.claim = prev
		s.mu.Unlock()
	}
}

// stop removes the handler: signals take their default action again.
func (s *signals) stop() {
	signal.Stop(s.ch)
	close(s.quit)
	<-s.done
}

// context is the context every command runs with: the one the signals
// cancel, or (an App made by a test) one that nothing cancels.
func (a *App) context() context.Context {
	if a.signals == nil {
		return context.Background()
	}
	return a.signals.Context()
}

// signalAgain is closed by a second signal (never, without a handler).
func (a *App) signalAgain() <-chan struct{} {
	if a.signals == nil {
		return nil
	}
	return a.signals.Again()
}

// interrupts is term.REPL.Interrupts: nil without a handler.
func (a *App) interrupts() func() (<-chan os.Signal, func()) {
	if a.signals == nil {
		return nil
	}
	return a.signals.Interrupts
}
