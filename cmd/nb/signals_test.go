package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// nb's one signal handler: SIGINT goes to the REPL that holds the
// interrupts and ends nothing; once given back, a signal cancels the
// run's context with the signal as its cause, and whatever a command
// returns for it (the cause, or the context's error) exits 128 plus its
// number; a second signal closes Again.
func TestSignalsOneHandler(t *testing.T) {
	// The signals go to a process of its own (this test binary run again
	// for this test alone): sent to the test process, they reach the other
	// tests' handlers and, once this one stops, the default action.
	if os.Getenv("NB_TEST_SIGNALS_CHILD") != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSignalsOneHandler$", "-test.count=1")
		cmd.Env = append(os.Environ(), "NB_TEST_SIGNALS_CHILD=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return
	}
	s := watchSignals()
	defer s.stop()
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devnull.Close()
	a := &App{signals: s, Stderr: devnull}
	wait := func(what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: not within 10s", what)
		}
	}

	ints, release := s.Interrupts()
	syscall.Kill(os.Getpid(), syscall.SIGINT) //nolint:errcheck // checked below
	select {
	case <-ints:
	case <-time.After(10 * time.Second):
		t.Fatal("SIGINT did not reach the REPL holding the interrupts")
	}
	if a.context().Err() != nil {
		t.Fatal("SIGINT for the REPL ended the run")
	}
	release()

	syscall.Kill(os.Getpid(), syscall.SIGTERM) //nolint:errcheck // checked below
	wait("SIGTERM ending the run", a.context().Done())
	var se *signalError
	if !errors.As(context.Cause(a.context()), &se) || se.sig != syscall.SIGTERM {
		t.Fatalf("cause %v, want SIGTERM's", context.Cause(a.context()))
	}
	for _, err := range []error{se, fmt.Errorf("export: %w", context.Canceled), fmt.Errorf("bus: %w", context.Cause(a.context()))} {
		if code := a.report(err); code != exitTerminated {
			t.Errorf("report(%v) = %d, want %d", err, code, exitTerminated)
		}
	}
	if code := a.report(nil); code != exitOK {
		t.Errorf("a server stopped cleanly: %d, want 0", code)
	}
	syscall.Kill(os.Getpid(), syscall.SIGINT) //nolint:errcheck // checked below
	wait("a second signal", a.signalAgain())
	if !errors.As(context.Cause(a.context()), &se) || se.sig != syscall.SIGTERM {
		t.Fatalf("the second signal changed the cause to %v", context.Cause(a.context()))
	}
}
