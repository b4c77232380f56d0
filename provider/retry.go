package provider

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// RetryPolicy says how failed requests are tried again: exponential
// backoff with jitter, for retryable errors reached before any data was
// delivered to the user. A request that timed out (a *TimeoutError:
// no connection, no first byte, a stalled stream) is tried again once at
// most, whatever MaxRetries says: a dead endpoint must fail in minutes.
type RetryPolicy struct {
	// MaxRetries is the number of retries after the first attempt; 0 disables.
	MaxRetries int
	// Base is the first delay; each retry doubles it, up to Max.
	Base, Max time.Duration
	// Jitter multiplies each delay by a random factor in [0.5, 1.5).
	Jitter bool
	// Sleep waits d or until ctx ends; nil means a timer (tests replace it).
	Sleep func(ctx context.Context, d time.Duration) error
	// OnRetry is told about each retry before its delay: the error that
	// failed the attempt, the number of the retry about to be made (1 for
	// the first) and the delay before it. It is called for every retry and
	// for nothing else; may be nil.
	OnRetry func(err error, attempt int, delay time.Duration)
}

// DefaultRetryPolicy is 2 retries, 1 s base, 60 s cap, with jitter.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxRetries: 2, Base: time.Second, Max: 60 * time.Second, Jitter: true}
}

// Delay is the wait before retry number attempt (0-based), before jitter.
func (p RetryPolicy) Delay(attempt int) time.Duration {
	d := p.Base
	for i := 0; i < attempt && d < p.Max; i++ {
		d *= 2
	}
	if p.Max > 0 && d > p.Max {
		d = p.Max
	}
	return d
}

// WithRetry wraps p so that Complete is retried under policy. Nothing is
// retried once a streamed event has reached the caller, a Retry-After
// longer than policy.Max ends the attempts at once, and a second timeout
// ends them too.
func WithRetry(p Provider, policy RetryPolicy) Provider {
	if policy.MaxRetries <= 0 {
		return p
	}
	return &retrying{Provider: p, policy: policy}
}

type retrying struct {
	Provider
	policy RetryPolicy
}

func (r *retrying) Complete(ctx context.Context, req Request, onEvent func(Event)) (*Response, error) {
	timeouts := 0
	for attempt := 0; ; attempt++ {
		delivered := false
		resp, err := r.Provider.Complete(ctx, req, func(ev Event) {
			delivered = true
			if onEvent != nil {
				onEvent(ev)
			}
		})
		if err == nil || delivered || attempt >= r.policy.MaxRetries || !IsRetryable(err) || ctx.Err() != nil {
			return resp, err
		}
		var te *TimeoutError
		if errors.As(err, &te) {
			if timeouts++; timeouts > 1 {
				return resp, err
			}
		}
		delay := r.policy.Delay(attempt)
		if r.policy.Jitter {
			delay = time.Duration(float64(delay) * (0.5 + rand.Float64()))
		}
		var pe *Error
		if errors.As(err, &pe) && pe.RetryAfter > 0 {
			if r.policy.Max > 0 && pe.RetryAfter > r.policy.Max {
				return resp, err
			}
			delay = pe.RetryAfter
		}
		if r.policy.OnRetry != nil {
			r.policy.OnRetry(err, attempt+1, delay)
		}
		if fn := retryNotifyOf(ctx); fn != nil {
			fn(err, attempt+1, delay)
		}
		sleep := r.policy.Sleep
		if sleep == nil {
			sleep = sleepContext
		}
		if serr := sleep(ctx, delay); serr != nil {
			return resp, err
		}
	}
}

func sleepContext(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
