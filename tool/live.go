package tool

import (
	"context"
	"unicode/utf8"
)

// LiveOutput receives a tool's output while the tool runs: stream names
// where it came from ("stdout", "stderr"), text is a piece of it, whole
// UTF-8. It may be called from several goroutines at once. What it gets
// is for people watching; the model gets the tool's result, as always.
type LiveOutput func(stream, text string)

type liveKey struct{}

// WithLiveOutput returns ctx carrying f, for the tools run with it.
func WithLiveOutput(ctx context.Context, f LiveOutput) context.Context {
	return context.WithValue(ctx, liveKey{}, f)
}

// LiveOutputFrom returns the LiveOutput ctx carries, or nil.
func LiveOutputFrom(ctx context.Context) LiveOutput {
	f, _ := ctx.Value(liveKey{}).(LiveOutput)
	return f
}

// LiveWriter is an io.Writer that passes what is written to a
// LiveOutput as text, holding back a rune cut at the end of one write
// until the next completes it. It is not safe for concurrent use: give
// each stream its own.
type LiveWriter struct {
	f      LiveOutput
	stream string
	carry  []byte
}

// NewLiveWriter returns a writer for stream; nil when f is nil.
func NewLiveWriter(f LiveOutput, stream string) *LiveWriter {
	if f == nil {
		return nil
	}
	return &LiveWriter{f: f, stream: stream}
}

// Write implements io.Writer; it never fails.
func (w *LiveWriter) Write(p []byte) (int, error) {
	n := len(p)
	b := append(w.carry, p...)
	w.carry = nil
	// Keep back an incomplete rune at the end (at most 3 bytes).
	cut := len(b)
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				cut = i
			}
			break
		}
	}
	if cut < len(b) {
		w.carry = append([]byte(nil), b[cut:]...)
		b = b[:cut]
	}
	if len(b) > 0 {
		w.f(w.stream, string(b))
	}
	return n, nil
}

// Flush passes on what Write held back (the bytes of a rune the stream
// ended in the middle of).
func (w *LiveWriter) Flush() {
	if w != nil && len(w.carry) > 0 {
		w.f(w.stream, string(w.carry))
		w.carry = nil
	}
}
