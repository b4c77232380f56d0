package script

import (
	"context"
	"io"
	"sync"
)

type outputKey struct{}

// sharedOutput is the writer of WithOutput; calls that share it write
// one at a time.
type sharedOutput struct {
	mu sync.Mutex
	w  io.Writer
}

// WithOutput returns a context whose calls (Runtime.Call) send to w what
// their script writes: print, io.write, io.stdout and io.stderr, and the
// output of the commands an unsandboxed function runs (os.execute, the
// standard error of io.popen and of Clojure's bb). Without it, that
// output is discarded: nothing a script writes reaches nb's own standard
// output or error. Calls that share the context write to w one at a time,
// and none writes to w after its Call has returned.
func WithOutput(ctx context.Context, w io.Writer) context.Context {
	return context.WithValue(ctx, outputKey{}, &sharedOutput{w: w})
}

// callOutput is the output of one call: the caller's writer until the
// call returns, nothing after (a script the caller gave up on may go on
// for a moment).
type callOutput struct {
	mu     sync.Mutex
	dst    *sharedOutput // nil: discard
	closed bool
}

func newCallOutput(ctx context.Context) *callOutput {
	dst, _ := ctx.Value(outputKey{}).(*sharedOutput)
	if dst != nil && dst.w == nil {
		dst = nil
	}
	return &callOutput{dst: dst}
}

// Write implements io.Writer; it never fails, so a script's print does
// not depend on where its output goes.
func (o *callOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed || o.dst == nil {
		return len(p), nil
	}
	o.dst.mu.Lock()
	_, _ = o.dst.w.Write(p)
	o.dst.mu.Unlock()
	return len(p), nil
}

// close ends the call's output: later writes are discarded.
func (o *callOutput) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
}
