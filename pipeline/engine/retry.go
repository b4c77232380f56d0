package engine

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"net"
	"strings"
	"time"

	"github.com/nbots/nb/provider"
)

// Backoff is §3.6's BackoffConfig.
type Backoff struct {
	Initial time.Duration
	Factor  float64
	Max     time.Duration
	Jitter  bool
}

// DefaultBackoff is §3.6's defaults: 200 ms, ×2, at most 60 s, jitter.
var DefaultBackoff = Backoff{Initial: 200 * time.Millisecond, Factor: 2, Max: 60 * time.Second, Jitter: true}

// Delay is the wait before retry number attempt (1 for the first retry):
// min(initial·factor^(attempt−1), max), times a random factor in
// [0.5, 1.5) with jitter. nb caps the jittered delay at max too (D20):
// the letter lets a 60 s cap become 90 s.
func (b Backoff) Delay(attempt int, rnd func() float64) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := float64(b.Initial) * math.Pow(b.Factor, float64(attempt-1))
	if b.Max > 0 && d > float64(b.Max) {
		d = float64(b.Max)
	}
	if b.Jitter {
		if rnd == nil {
			rnd = rand.Float64
		}
		d *= 0.5 + rnd()
	}
	if b.Max > 0 && d > float64(b.Max) {
		d = float64(b.Max)
	}
	return time.Duration(d)
}

// RetryPolicy is §3.6's RetryPolicy: how many times a stage runs at
// most, and the waits between runs.
type RetryPolicy struct {
	// MaxAttempts counts every execution: 1 means no retries.
	MaxAttempts int
	Backoff     Backoff
	// Name is the preset's name, or "" when the attempts come from
	// max_retries.
	Name string
}

// Presets are §3.6's preset policies, selected by retry_policy= (D7).
// Their attempts are total executions (D7): standard runs a stage at
// most 5 times.
var Presets = map[string]RetryPolicy{
	"none":       {Name: "none", MaxAttempts: 1, Backoff: DefaultBackoff},
	"standard":   {Name: "standard", MaxAttempts: 5, Backoff: Backoff{Initial: 200 * time.Millisecond, Factor: 2, Max: 60 * time.Second, Jitter: true}},
	"aggressive": {Name: "aggressive", MaxAttempts: 5, Backoff: Backoff{Initial: 500 * time.Millisecond, Factor: 2, Max: 60 * time.Second, Jitter: true}},
	"linear":     {Name: "linear", MaxAttempts: 3, Backoff: Backoff{Initial: 500 * time.Millisecond, Factor: 1, Max: 60 * time.Second, Jitter: true}},
	"patient":    {Name: "patient", MaxAttempts: 3, Backoff: Backoff{Initial: 2000 * time.Millisecond, Factor: 3, Max: 60 * time.Second, Jitter: true}},
}

// PresetNames lists the presets in the order of §3.6's table.
var PresetNames = []string{"none", "standard", "aggressive", "linear", "patient"}

// ShouldRetry is §3.6's default predicate: true for network errors,
// timeouts, 429 and 5xx answers and errors a provider marks transient;
// false for everything else (401, 403, 400, validation and
// configuration errors).
func ShouldRetry(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var pe *provider.Error
	if errors.As(err, &pe) {
		switch {
		case pe.Status == 429 || pe.Status >= 500:
			return true
		case pe.Status == 0:
			return pe.Err != nil || pe.Retryable
		default:
			return false
		}
	}
	var te *provider.TimeoutError
	if errors.As(err, &te) {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	var tr interface{ Temporary() bool }
	if errors.As(err, &tr) {
		return tr.Temporary()
	}
	return false
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// presetNames is the list for messages.
func presetNames() string { return strings.Join(PresetNames, ", ") }
