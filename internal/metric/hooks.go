package metric

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/nbots/nb/provider"
)

// Server names the server whose requests a middleware counts; the
// process's servers share one registry.
const (
	Serve     = "serve"
	Gateway   = "gateway"
	Robopages = "robopages"
	MCP       = "mcp"
)

// Up marks the process as the server named (nb_build_info{server}).
func Up(server string) { buildInfo.Set(1, "server", Label("server", server)) }

// methodLabel bounds an HTTP method.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodHead, http.MethodOptions, http.MethodPatch:
		return m
	}
	return Other
}

// routeLabel bounds a route pattern: "" (no route matched) is
// "unmatched"; patterns are the servers' own, never a request's path.
func routeLabel(pattern string) string {
	if pattern == "" {
		return "unmatched"
	}
	if len(pattern) > 100 || strings.ContainsAny(pattern, "\"\\\n") {
		return Other
	}
	return keep("route", pattern)
}

// StatusClass is "2xx", "4xx" ...; 0 (the client left before an answer)
// is "499".
func StatusClass(status int) string {
	if status <= 0 {
		return "499"
	}
	if status == 499 {
		return "499"
	}
	return strconv.Itoa(status/100) + "xx"
}

// HTTP counts a request server answered: pattern is the route pattern
// the mux matched ("" for none), status the answer's (0: none).
func HTTP(server, pattern, method string, status int, d time.Duration) {
	s, route, m := Label("server", server), routeLabel(pattern), methodLabel(method)
	httpRequests.Inc("server", s, "route", route, "method", m, "status", StatusClass(status))
	httpDuration.Observe(d.Seconds(), "server", s, "route", route, "method", m)
	minutes.add(time.Now(), d, status >= 500)
	if status >= 500 {
		// A pattern may name its method already ("POST /v1/…").
		what := route
		if !strings.HasPrefix(route, method+" ") {
			what = method + " " + route
		}
		RecordError(server, what+": HTTP "+strconv.Itoa(status))
	}
}

// Middleware counts the requests of next, whose innermost handler is a
// ServeMux (its pattern is read from the request after it ran).
func Middleware(server string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		defer func() { HTTP(server, r.Pattern, r.Method, sw.status, time.Since(start)) }()
		next.ServeHTTP(sw, r)
	})
}

// statusWriter records the status of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (Flush,
// Hijack, deadlines).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Hijack hands the connection over (a websocket); it counts as 101.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil && w.status == 0 {
		w.status = http.StatusSwitchingProtocols
	}
	return conn, rw, err
}

// Flush sends what was written (server-sent events).
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		if w.status == 0 {
			w.status = http.StatusOK
		}
		f.Flush()
	}
}

// ErrorKind classifies a provider call's error for labels: timeout,
// rate_limited, auth, client, server, network, context_length,
// canceled, other.
func ErrorKind(err error) string {
	if err == nil {
		return "ok"
	}
	if errors.Is(err, context.Canceled) {
		return "canceled"
	}
	var te *provider.TimeoutError
	if errors.As(err, &te) || errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	if provider.IsContextLength(err) {
		return "context_length"
	}
	var pe *provider.Error
	if errors.As(err, &pe) {
		switch {
		case pe.Status == http.StatusTooManyRequests:
			return "rate_limited"
		case pe.Status == http.StatusUnauthorized || pe.Status == http.StatusForbidden:
			return "auth"
		case pe.Status >= 500:
			return "server"
		case pe.Status >= 400:
			return "client"
		case pe.Status == 0:
			return "network"
		}
	}
	return Other
}

// ProviderLabels are the labels of a bot's provider calls.
type ProviderLabels struct {
	// Cartridge is the cartridge's id, or "client" for one a client sent.
	Cartridge string
	// Model is the cartridge's model; a request that overrides it counts
	// as "override".
	Model string
}

// ProviderCounter counts the calls of one provider for a cartridge
// (package provider/instrument wraps every provider a bot calls in one):
// their outcome, duration, time to first token and tokens.
type ProviderCounter struct {
	prov, cart, model string
}

// NewProviderCounter counts the calls of the provider providerID with
// the labels l.
func NewProviderCounter(providerID string, l ProviderLabels) *ProviderCounter {
	return &ProviderCounter{prov: Label("provider", providerID), cart: Label("cartridge", l.Cartridge), model: Label("model", l.Model)}
}

// ProviderCall is one call being counted (each attempt, when retries
// wrap the provider): Event at each event it streams, Done at its end.
// It is not safe for concurrent use, as a call's events are not.
type ProviderCall struct {
	c     *ProviderCounter
	model string
	start time.Time
	first bool
}

// Start starts counting a call; overridden says that the request asked
// for a model of its own (provider.Request.Model), counted as "override"
// (a client's names are not bounded).
func (c *ProviderCounter) Start(overridden bool) *ProviderCall {
	model := c.model
	if overridden {
		model = "override"
	}
	return &ProviderCall{c: c, model: model, start: time.Now()}
}

// Event records an event of the call: the first one is its time to
// first token.
func (pc *ProviderCall) Event() {
	if !pc.first {
		pc.first = true
		providerFirst.Observe(time.Since(pc.start).Seconds(), "provider", pc.c.prov, "model", pc.model)
	}
}

// Done counts the call's end: its outcome, duration and the response's
// tokens.
func (pc *ProviderCall) Done(resp *provider.Response, err error) {
	c, model := pc.c, pc.model
	d := time.Since(pc.start)
	kind := ErrorKind(err)
	providerCalls.Inc("provider", c.prov, "model", model, "cartridge", c.cart, "outcome", kind)
	providerDuration.Observe(d.Seconds(), "provider", c.prov, "model", model)
	if err != nil && kind != "canceled" {
		RecordError("provider "+c.prov, clip(err.Error()))
	}
	if resp != nil {
		u := resp.Usage
		for _, k := range [...]struct {
			kind string
			n    int
		}{{"input", u.InputTokens}, {"output", u.OutputTokens}, {"cache_read", u.CacheReadTokens}, {"cache_write", u.CacheWriteTokens}, {"reasoning", u.ReasoningTokens}} {
			if k.n > 0 {
				tokens.Add(k.n, "provider", c.prov, "model", model, "cartridge", c.cart, "kind", k.kind)
			}
		}
		days.add(time.Now(), model, u.InputTokens, u.OutputTokens)
	}
}

// OnRetry is a provider.RetryPolicy's OnRetry that counts each retry
// of providerID's calls for cartridge, then calls next (may be nil).
func OnRetry(next func(error, int, time.Duration), providerID, cartridge string) func(error, int, time.Duration) {
	prov, cart := Label("provider", providerID), Label("cartridge", cartridge)
	return func(err error, attempt int, delay time.Duration) {
		providerRetries.Inc("provider", prov, "cartridge", cart, "kind", ErrorKind(err))
		if next != nil {
			next(err, attempt, delay)
		}
	}
}

// ToolDone counts a tool call that started at start; *isError is read
// when it is called (deferred at the call's start).
func ToolDone(name string, start time.Time, isError *bool) {
	t := Label("tool", name)
	outcome := "ok"
	if isError != nil && *isError {
		outcome = "error"
	}
	toolCalls.Inc("tool", t, "outcome", outcome)
	toolDuration.Observe(time.Since(start).Seconds(), "tool", t)
}

// Refused counts a run the admission refused for reason (busy,
// token_busy, rate, stopping).
func Refused(reason string) { admissionRef.Inc("reason", Label("reason", reason)) }

// RunsFunc makes nb_runs_in_flight read running and waiting at each
// scrape.
func RunsFunc(running, waiting func() int) {
	runsInFlight.Func(func() float64 { return float64(running()) }, "state", "running")
	runsInFlight.Func(func() float64 { return float64(waiting()) }, "state", "waiting")
}

// Turn starts a gateway turn of channel and source; the function it
// returns ends it with its error.
func Turn(channel, source string) func(err error) {
	ch, src := Label("channel", channel), Label("source", source)
	end := StartRun("turn", ch+"/"+src)
	start := time.Now()
	return func(err error) {
		outcome := "ok"
		if err != nil {
			outcome = "error"
		}
		turns.Inc("channel", ch, "source", src, "outcome", outcome)
		turnDuration.Observe(time.Since(start).Seconds(), "channel", ch, "source", src)
		end(err)
	}
}

// Received counts a message received on channel.
func Received(channel string) { received.Inc("channel", Label("channel", channel)) }

// Delivered counts a message delivered to channel.
func Delivered(channel string) { delivered.Inc("channel", Label("channel", channel)) }

// Undeliverable counts a reply given up on.
func Undeliverable(channel, reason string) {
	undeliverable.Inc("channel", Label("channel", channel))
	RecordError("deliver "+Label("channel", channel), clip(reason))
}

// ChannelFunc makes nb_gateway_channel_connected read up at each scrape.
func ChannelFunc(channel string, up func() bool) {
	channelUp.Func(func() float64 {
		if up() {
			return 1
		}
		return 0
	}, "channel", Label("channel", channel))
}

// CronRun counts a cron job's run.
func CronRun(err error) {
	if err != nil {
		cronRuns.Inc("outcome", "error")
		return
	}
	cronRuns.Inc("outcome", "ok")
}

// BudgetFunc makes the budget gauges read used and limit at each scrape.
func BudgetFunc(budget string, used, limit func() int) {
	b := Label("budget", budget)
	budgetSpent.Func(func() float64 { return float64(used()) }, "budget", b)
	budgetLimit.Func(func() float64 { return float64(limit()) }, "budget", b)
}

// clip bounds an error's text for the control page.
func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// Beat counts a heartbeat beat by its outcome: called (the model was
// called to run the tasks), skipped (nothing to do: no HEARTBEAT.md, no
// unchecked task, or the model's decision was skip), failed (the file or
// the decision could not be read, so the tasks did not run).
func Beat(outcome string) {
	heartbeats.Inc("outcome", Label("outcome", outcome))
}
