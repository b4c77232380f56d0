package channel

import (
	"context"
	"log/slog"
	"time"
)

// Backoff spaces a receive loop's retries: Base after the first failure,
// doubled after each further one up to Max, and Base again after a
// success. With Conn set, Failed (and Retry) also mark the loop's
// connection down with the failure, and Connected marks it up.
type Backoff struct {
	Base, Max time.Duration
	Conn      *Conn
	next      time.Duration
}

// Next is the wait before the next try: after, when the platform named
// one (a 429's retry-after), else the doubling wait.
func (b *Backoff) Next(after time.Duration) time.Duration {
	if b.next < b.Base {
		b.next = b.Base
	}
	if after > 0 {
		return after
	}
	d := b.next
	b.next = min(b.next*2, max(b.Max, b.Base))
	return d
}

// Reset starts the waits over after a success.
func (b *Backoff) Reset() { b.next = b.Base }

// Connected records that the loop connected and receives: the waits
// start over (Reset) and Conn is marked up.
func (b *Backoff) Connected() {
	b.Reset()
	b.Conn.Up()
}

// Failed records that the loop lost its connection, or could not make
// one, because of err, and returns the wait before the next try (see
// Next).
func (b *Backoff) Failed(err error, after time.Duration) time.Duration {
	b.Conn.Down(err)
	return b.Next(after)
}

// Retry calls try until it succeeds, ctx ends, or classify calls its
// error final. Between tries it logs msg with the error at Warn and waits
// b.Next of the wait classify read from the error (0: none). It reports
// whether try succeeded, and the final error if there was one; false
// with a nil error means ctx ended.
func Retry(ctx context.Context, log *slog.Logger, msg string, b *Backoff, try func(context.Context) error, classify func(error) (final error, after time.Duration)) (bool, error) {
	for {
		err := try(ctx)
		if err == nil {
			b.Reset()
			return true, nil
		}
		if ctx.Err() != nil {
			return false, nil
		}
		f, after := classify(err)
		if f != nil {
			return false, f
		}
		d := b.Failed(err, after)
		log.Warn(msg, "err", err, "retry_in", d)
		if !Sleep(ctx, d) {
			return false, nil
		}
	}
}
