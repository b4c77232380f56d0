package metric

import "time"

// The families of the stores and the bus (--store, --bus), the gateway's
// outbound queues, cron's misses, the gateway's tokens by source and the
// MCP calls; docs/observability.md lists them.
var (
	opBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

	storeDuration = NewHistogram("nb_store_op_duration_seconds", "Duration of an operation of a shared store (--store), by store (conversations, runs), backend (postgres, files) and op.", opBuckets...)
	storeErrors   = NewCounter("nb_store_op_errors_total", "Operations of a shared store (--store) that failed, by store, backend and op.")
	busDuration   = NewHistogram("nb_bus_op_duration_seconds", "Duration of an operation of the gateway's bus (--bus), by backend (jetstream) and op.", opBuckets...)
	busErrors     = NewCounter("nb_bus_op_errors_total", "Operations of the gateway's bus (--bus) that failed, by backend and op.")

	queueDepth   = NewGauge("nb_gateway_queue_depth", "Outbound messages waiting for delivery or being delivered, by channel (summed over its destinations).")
	queueDeepest = NewGauge("nb_gateway_queue_depth_max", "The outbound messages of the channel's deepest destination, by channel.")

	cronMisses   = NewCounter("nb_gateway_cron_misses_total", "Cron runs that were due and did not run at their time, by reason (skipped, expired, coalesced, claim_error).")
	sourceTokens = NewCounter("nb_gateway_tokens_total", "Tokens of the gateway's model calls as its budget ledger counts them, by source (chat, cron, heartbeat, consolidation, subagent) and kind (input, output).")

	mcpCalls    = NewCounter("nb_mcp_calls_total", "Calls to the tools of MCP servers, by server (as configured), tool and outcome (ok, tool_error, timeout, refused, lost, canceled, error).")
	mcpDuration = NewHistogram("nb_mcp_call_duration_seconds", "Duration of a call to an MCP server's tool, by server and tool.", toolBuckets...)
)

// StoreOp counts an operation op of a store (conversations, runs) kept
// by backend (postgres, files) that started at start; err not nil counts
// it failed too. Callers pass nil for the answers that are not failures
// (a conversation busy, a run held by another process).
func StoreOp(store, backend, op string, start time.Time, err error) {
	s, b, o := Label("store", store), Label("backend", backend), Label("op", op)
	storeDuration.Observe(time.Since(start).Seconds(), "store", s, "backend", b, "op", o)
	if err != nil {
		storeErrors.Inc("store", s, "backend", b, "op", o)
	}
}

// BusOp counts an operation op of the bus kept by backend that started
// at start (zero: count only its error); err not nil counts it failed.
func BusOp(backend, op string, start time.Time, err error) {
	b, o := Label("backend", backend), Label("op", op)
	if !start.IsZero() {
		busDuration.Observe(time.Since(start).Seconds(), "backend", b, "op", o)
	}
	if err != nil {
		busErrors.Inc("backend", b, "op", o)
	}
}

// QueueFunc makes the queue gauges of channel read depth once at each
// scrape: the messages of all its destinations and those of the deepest.
func QueueFunc(channel string, depth func() (total, deepest int)) {
	ch := Label("channel", channel)
	read := perScrape(func() [2]int { t, d := depth(); return [2]int{t, d} })
	queueDepth.Func(func() float64 { return float64(read()[0]) }, "channel", ch)
	queueDeepest.Func(func() float64 { return float64(read()[1]) }, "channel", ch)
}

// CronMissed counts n cron runs that did not run at their time, for
// reason: skipped (their slots passed while no gateway ran, nanobot's
// rule), expired (a one-time job disabled unrun), coalesced (slots
// folded into one run), claim_error (a slot that could not be claimed).
func CronMissed(reason string, n int) {
	if n > 0 {
		cronMisses.Add(n, "reason", Label("reason", reason))
	}
}

// SourceTokens counts the tokens of a gateway's model call made for
// source.
func SourceTokens(source string, input, output int) {
	src := Label("source", source)
	if input > 0 {
		sourceTokens.Add(input, "source", src, "kind", "input")
	}
	if output > 0 {
		sourceTokens.Add(output, "source", src, "kind", "output")
	}
}

// MCPCall counts a call to tool of the MCP server named server (as its
// configuration names it) that started at start, with its outcome.
func MCPCall(server, tool, outcome string, start time.Time) {
	s, t := Label("mcp_server", server), Label("tool", tool)
	mcpCalls.Inc("server", s, "tool", t, "outcome", Label("outcome", outcome))
	mcpDuration.Observe(time.Since(start).Seconds(), "server", s, "tool", t)
}
