package metric

// The families nb exposes; docs/observability.md lists them with their
// labels (TestDocsListEveryMetric keeps it true).
var (
	durationBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	callBuckets     = []float64{.1, .25, .5, 1, 2.5, 5, 10, 20, 40, 80, 160, 300, 600}
	firstBuckets    = []float64{.05, .1, .25, .5, 1, 2, 4, 8, 16, 32, 64}
	toolBuckets     = []float64{.001, .01, .05, .1, .5, 1, 5, 10, 30, 60, 300}

	httpRequests = NewCounter("nb_http_requests_total", "HTTP requests answered, by server, route pattern, method and status class.")
	httpDuration = NewHistogram("nb_http_request_duration_seconds", "Time to answer an HTTP request (a stream: until its end), by server, route pattern and method.", durationBuckets...)

	providerCalls    = NewCounter("nb_provider_calls_total", "Model API calls (each attempt), by provider, model, cartridge and outcome (ok or an error kind).")
	providerDuration = NewHistogram("nb_provider_call_duration_seconds", "Duration of a model API call, by provider and model.", callBuckets...)
	providerFirst    = NewHistogram("nb_provider_time_to_first_token_seconds", "Time from a streamed call's start to its first event, by provider and model.", firstBuckets...)
	providerRetries  = NewCounter("nb_provider_retries_total", "Model API calls tried again, by provider, cartridge and error kind.")
	tokens           = NewCounter("nb_tokens_total", "Tokens as the providers report them, by provider, model, cartridge and kind (input, output, cache_read, cache_write, reasoning).")

	toolCalls    = NewCounter("nb_tool_calls_total", "Tool calls run, by tool and outcome (ok, error).")
	toolDuration = NewHistogram("nb_tool_call_duration_seconds", "Duration of a tool call, by tool.", toolBuckets...)

	runsInFlight = NewGauge("nb_runs_in_flight", "Runs in progress on nb serve (those waiting on their client included), by state (running, waiting).")
	admissionRef = NewCounter("nb_admission_refusals_total", "Runs refused by nb serve's admission, by reason (busy, token_busy, rate, stopping).")

	turns         = NewCounter("nb_gateway_turns_total", "Gateway turns run, by channel and source (chat, cron, heartbeat, ...) and outcome.")
	turnDuration  = NewHistogram("nb_gateway_turn_duration_seconds", "Duration of a gateway turn, by channel and source.", callBuckets...)
	received      = NewCounter("nb_gateway_messages_received_total", "Messages received from the channels, by channel.")
	delivered     = NewCounter("nb_gateway_messages_delivered_total", "Messages delivered to the channels, by channel.")
	undeliverable = NewCounter("nb_gateway_undeliverable_total", "Replies given up on, by channel.")
	channelUp     = NewGauge("nb_gateway_channel_connected", "1 when a channel is connected, 0 when not, by channel.")
	cronRuns      = NewCounter("nb_gateway_cron_runs_total", "Cron jobs run, by outcome (ok, error).")
	heartbeats    = NewCounter("nb_gateway_heartbeat_beats_total", "Heartbeat beats, by outcome: called (the model ran the tasks), skipped (nothing to do), failed.")
	budgetSpent   = NewGauge("nb_gateway_budget_used_tokens", "Tokens used against each budget (daily), as the budget ledger counts them.")
	budgetLimit   = NewGauge("nb_gateway_budget_limit_tokens", "Each budget's limit in tokens (0: none).")
	buildInfo     = NewGauge("nb_build_info", "Always 1: the server that answers (serve, gateway, robopages, mcp).")
)
