package provider

import (
	"context"
	"time"
)

type retryNotifyKey struct{}

// RetryNotify is told about a retry: the error, the retry's number (from
// 1) and the delay before it.
type RetryNotify func(err error, attempt int, delay time.Duration)

// WithRetryNotify returns ctx carrying fn, which WithRetry's provider
// tells about each retry of a request made with that context, besides the
// policy's OnRetry: one bot's provider is shared by many runs, and each
// run reports its own retries.
func WithRetryNotify(ctx context.Context, fn RetryNotify) context.Context {
	return context.WithValue(ctx, retryNotifyKey{}, fn)
}

func retryNotifyOf(ctx context.Context) RetryNotify {
	fn, _ := ctx.Value(retryNotifyKey{}).(RetryNotify)
	return fn
}
