// Package admission decides whether a run may start: the runs in progress
// on the whole server, the runs of each tenant (a token, an end user of a
// chat) and each tenant's rate. It knows no transport: a refusal is an
// *Error saying which limit was reached and when to try again, and each
// front-end puts it on its own wire (429 with Retry-After over HTTP, an
// error frame on a websocket, a polite reply in a chat).
//
// A run that waits on its client (a tool result, a confirmation) leaves
// the server's runs in progress for a separate ceiling of waiting runs,
// still counting against its own tenant, so the clients that keep runs
// waiting never starve the others.
package admission

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Limits bound the runs of a Controller. A zero field takes its default.
type Limits struct {
	// MaxRuns bounds the runs in progress (64 by default); runs waiting
	// on their client do not count.
	MaxRuns int
	// MaxRunsPerTenant bounds a tenant's runs, in progress or waiting
	// (a Policy's own MaxRuns wins); 0 is MaxRuns.
	MaxRunsPerTenant int
	// MaxWaiting bounds the runs waiting on their client (4 × MaxRuns by
	// default); a run that would go beyond it stays in progress.
	MaxWaiting int
}

// DefaultMaxRuns is MaxRuns when Limits leave it zero.
const DefaultMaxRuns = 64

func (l Limits) withDefaults() Limits {
	if l.MaxRuns <= 0 {
		l.MaxRuns = DefaultMaxRuns
	}
	if l.MaxRunsPerTenant <= 0 {
		l.MaxRunsPerTenant = l.MaxRuns
	}
	if l.MaxWaiting <= 0 {
		l.MaxWaiting = 4 * l.MaxRuns
	}
	return l
}

// Policy is what one tenant may do.
type Policy struct {
	// MaxRuns bounds the tenant's runs (Limits.MaxRunsPerTenant when 0).
	MaxRuns int
	// Rate bounds the runs the tenant may start; the zero Rate is
	// unlimited.
	Rate Rate
}

// Tenant is the running count and the rate's bucket of one client of the
// limits (a token, a chat user). Its zero value is ready; it must not be
// copied once used.
type Tenant struct {
	mu     sync.Mutex
	tokens float64 // the rate's bucket
	last   time.Time
	runs   int
}

// Runs is the number of the tenant's runs, in progress or waiting.
func (t *Tenant) Runs() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.runs
}

// take spends one run of rate; when none is left it returns how long
// until one is.
func (t *Tenant) take(rate Rate, now time.Time) (bool, time.Duration) {
	if rate.N <= 0 {
		return true, 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	per := rate.Per / time.Duration(rate.N)
	if t.last.IsZero() {
		t.tokens = float64(rate.N)
	} else {
		t.tokens = min(float64(rate.N), t.tokens+float64(now.Sub(t.last))/float64(per))
	}
	t.last = now
	if t.tokens >= 1 {
		t.tokens--
		return true, 0
	}
	return false, time.Duration((1 - t.tokens) * float64(per))
}

// Reason is which limit refused a run.
type Reason int

// The limits that refuse a run.
const (
	// Stopping: the controller is draining (the server shuts down).
	Stopping Reason = iota + 1
	// Busy: the server runs Limits.MaxRuns runs.
	Busy
	// TenantBusy: the tenant has its maximum of runs.
	TenantBusy
	// RateLimited: the tenant started as many runs as its rate allows.
	RateLimited
)

// Error is a refused run: which limit, its value, and how long to wait
// before trying again.
type Error struct {
	Reason Reason
	// Limit is the number of runs of the limit reached (Busy,
	// TenantBusy).
	Limit int
	// Rate is the tenant's rate (RateLimited).
	Rate Rate
	// RetryAfter is when trying again may succeed (0 when Stopping).
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	switch e.Reason {
	case Stopping:
		return "the server is shutting down: no new runs"
	case Busy:
		return fmt.Sprintf("the server is running its maximum of %d runs at once: try again shortly", e.Limit)
	case TenantBusy:
		return fmt.Sprintf("already at the maximum of %d runs in progress: try again when one ends", e.Limit)
	case RateLimited:
		return fmt.Sprintf("runs are limited to %s: try again in %s", e.Rate, max(e.RetryAfter.Round(time.Second), time.Second))
	}
	return "the run was refused"
}

// Controller admits runs within Limits.
type Controller struct {
	limits Limits

	mu       sync.Mutex
	active   int // in progress
	waiting  int // waiting on their client
	resuming int // waiting ones ready to go on, first in line for a slot
	draining bool
	freed    chan struct{} // closed when a slot frees (resumers wait on it)
	runs     sync.WaitGroup
}

// New returns a Controller for limits.
func New(limits Limits) *Controller {
	return &Controller{limits: limits.withDefaults(), freed: make(chan struct{})}
}

// Limits are the controller's limits, defaults filled in.
func (c *Controller) Limits() Limits { return c.limits }

// Admit starts a run for t within p: an *Error when a limit refuses it.
// The run's Done must be called when it ends.
func (c *Controller) Admit(t *Tenant, p Policy) (*Run, error) {
	limit := p.MaxRuns
	if limit <= 0 {
		limit = c.limits.MaxRunsPerTenant
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.draining {
		return nil, &Error{Reason: Stopping}
	}
	if c.active+c.resuming >= c.limits.MaxRuns {
		return nil, &Error{Reason: Busy, Limit: c.limits.MaxRuns, RetryAfter: time.Second}
	}
	t.mu.Lock()
	if t.runs >= limit {
		t.mu.Unlock()
		return nil, &Error{Reason: TenantBusy, Limit: limit, RetryAfter: time.Second}
	}
	t.runs++
	t.mu.Unlock()
	if ok, wait := t.take(p.Rate, time.Now()); !ok {
		t.mu.Lock()
		t.runs--
		t.mu.Unlock()
		return nil, &Error{Reason: RateLimited, Rate: p.Rate, RetryAfter: wait}
	}
	c.active++
	c.runs.Add(1)
	return &Run{c: c, t: t}, nil
}

// Active is the number of runs admitted and not done, waiting ones
// included.
func (c *Controller) Active() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active + c.waiting
}

// Waiting is the number of runs waiting on their client.
func (c *Controller) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.waiting
}

// Drain refuses every new run from now on (Stopping) and returns the
// number of runs not done.
func (c *Controller) Drain() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.draining = true
	return c.active + c.waiting
}

// Draining reports whether Drain was called.
func (c *Controller) Draining() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.draining
}

// Wait blocks until every run admitted is done.
func (c *Controller) Wait() { c.runs.Wait() }

// free hands a slot on; the caller holds c.mu.
func (c *Controller) free() {
	close(c.freed)
	c.freed = make(chan struct{})
}

// Run is one admitted run.
type Run struct {
	c *Controller
	t *Tenant

	mu     sync.Mutex // under c.mu when both are held
	waits  int        // Wait calls not resumed
	parked bool       // counted in c.waiting instead of c.active
	done   bool
}

// Done ends the run; later calls do nothing.
func (r *Run) Done() {
	c := r.c
	c.mu.Lock()
	r.mu.Lock()
	if r.done {
		r.mu.Unlock()
		c.mu.Unlock()
		return
	}
	r.done = true
	if r.parked {
		c.waiting--
	} else {
		c.active--
		c.free()
	}
	r.mu.Unlock()
	c.mu.Unlock()
	r.t.mu.Lock()
	r.t.runs--
	r.t.mu.Unlock()
	c.runs.Done()
}

// Wait says the run waits on its client: while every Wait is not yet
// resumed, it counts as waiting (when the waiting ceiling has room)
// rather than in progress. resume, called once the client answered,
// takes a slot of the runs in progress back before the run goes on,
// waiting for one if the server is full (it returns early when ctx
// ends). Waits may nest, as parallel tool calls do.
func (r *Run) Wait(ctx context.Context) (resume func()) {
	c := r.c
	c.mu.Lock()
	r.mu.Lock()
	r.waits++
	if r.waits == 1 && !r.done && !r.parked && c.waiting < c.limits.MaxWaiting {
		r.parked = true
		c.active--
		c.waiting++
		c.free()
	}
	r.mu.Unlock()
	c.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { r.resume(ctx) }) }
}

func (r *Run) resume(ctx context.Context) {
	c := r.c
	c.mu.Lock()
	r.mu.Lock()
	r.waits--
	if r.waits > 0 || !r.parked || r.done {
		r.mu.Unlock()
		c.mu.Unlock()
		return
	}
	r.mu.Unlock()
	c.resuming++
	for c.active >= c.limits.MaxRuns {
		freed := c.freed
		c.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			c.mu.Lock()
			c.resuming--
			c.mu.Unlock()
			return // still counted as waiting, until Done
		}
		c.mu.Lock()
	}
	c.resuming--
	r.mu.Lock()
	if r.parked && !r.done {
		r.parked = false
		c.waiting--
		c.active++
	}
	r.mu.Unlock()
	c.mu.Unlock()
}

type runKey struct{}

// NewContext returns ctx carrying r, for the code deep in the run that
// waits on the client (see Waiting).
func NewContext(ctx context.Context, r *Run) context.Context {
	return context.WithValue(ctx, runKey{}, r)
}

// FromContext returns the run of ctx; nil when it has none.
func FromContext(ctx context.Context) *Run {
	r, _ := ctx.Value(runKey{}).(*Run)
	return r
}

// Waiting is Run.Wait for the run of ctx; it does nothing when ctx has
// no run.
func Waiting(ctx context.Context) (resume func()) {
	if r := FromContext(ctx); r != nil {
		return r.Wait(ctx)
	}
	return func() {}
}

// Rate is a number of runs per period.
type Rate struct {
	N   int
	Per time.Duration
}

func (r Rate) String() string {
	if r.N <= 0 {
		return "unlimited"
	}
	switch r.Per {
	case time.Second:
		return fmt.Sprintf("%d/second", r.N)
	case time.Minute:
		return fmt.Sprintf("%d/minute", r.N)
	case time.Hour:
		return fmt.Sprintf("%d/hour", r.N)
	}
	return fmt.Sprintf("%d/%s", r.N, r.Per)
}

// ParseRate reads a rate written N/second, N/minute or N/hour (or s, m,
// h); "" is unlimited.
func ParseRate(s string) (Rate, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Rate{}, nil
	}
	n, unit, ok := strings.Cut(s, "/")
	count, err := strconv.Atoi(strings.TrimSpace(n))
	if !ok || err != nil || count <= 0 {
		return Rate{}, fmt.Errorf("rate %q: write a positive number of runs per second, minute or hour, for example 60/minute", s)
	}
	var per time.Duration
	switch strings.TrimSpace(unit) {
	case "s", "sec", "second":
		per = time.Second
	case "m", "min", "minute":
		per = time.Minute
	case "h", "hour":
		per = time.Hour
	default:
		return Rate{}, fmt.Errorf("rate %q: the period must be second, minute or hour, for example 60/minute", s)
	}
	return Rate{N: count, Per: per}, nil
}
