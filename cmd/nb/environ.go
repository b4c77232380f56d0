package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// envVar is an environment variable nb reads.
type envVar struct {
	Name string
	// Commands are the commands that read it ("" for every command).
	Commands string
	Doc      string
}

// environment is every variable nb reads, the one table `nb help` and the
// subcommands' help print. TestEnvironmentTable fails when the code reads
// a variable of nb's own (NANO_BOTS_*, NB_*, ROBOPAGES_*) that is not here.
var environment = []envVar{
	{"NANO_BOTS_CARTRIDGES_PATH", "", "folders (colon-separated) where cartridges are looked up; nb serve's default folders"},
	{"NANO_BOTS_CARTRIDGES_DIRECTORY", "", "the reference's older name of NANO_BOTS_CARTRIDGES_PATH"},
	{"NANO_BOTS_STATE_PATH", "", "where conversations are kept (default $XDG_STATE_HOME/nano-bots)"},
	{"NANO_BOTS_STATE_DIRECTORY", "", "the reference's older name of NANO_BOTS_STATE_PATH"},
	{"NANO_BOTS_END_USER", "", "whose conversations these are (default unknown)"},
	{"NANO_BOTS_ENCRYPTION_PASSWORD", "", "encrypts the state files (nb security tells whether it does)"},
	{"NB_STORE", "", "where conversations are kept instead of the state files: postgres://user:password@host:port/database (serve, gateway, mcp serve and state export/import: --store); with nb serve, its replicas also share streams, stored responses and agent runs there; with nb gateway, its chat sessions"},
	{"NB_STORE_LEASE_TTL", "", "how long a replica that died holds its conversations in a PostgreSQL store before another takes them over (default 15s; renewed every third of it)"},
	{"NANO_BOTS_HISTORY_BUDGET", "", "the history sent to the provider, in estimated tokens"},
	{"NB_DOTENV", "", "0 ignores the .env file of the working directory"},
	{"NB_SERVE_TOKEN", "serve, mcp serve", "the token clients must send (required beyond loopback)"},
	{"NB_AGENTS_TOKEN", "agents", "the token sent to an nb server's agents"},
	{"NB_GATEWAY_CONFIG", "gateway", "the gateway's configuration file (else $XDG_CONFIG_HOME/nb/gateway.json, else ~/.nanobot/config.json)"},
	{"NB_GATEWAY_TOKEN", "gateway", "the token of the gateway's web chat and websocket (required beyond loopback)"},
	{"NB_BUS", "gateway", "the bus replicas share, nats://… (default in-process; docs/scale-out.md)"},
	{"NANOBOT_*", "gateway", "overrides of the configuration, nanobot's way (NANOBOT_AGENTS__DEFAULTS__MODEL)"},
	{"ROBOPAGES_PATH", "robopages", "where robopages are looked up"},
	{"ROBOPAGES_TOKEN", "robopages serve", "the token clients of the robopages server must send"},
	{"ROBOPAGES_CONTAINER_RUNTIME", "", "docker or podman, for robopages that run in containers"},
	{"NO_COLOR", "", "no colours"},
	{"CLICOLOR_FORCE", "", "colours even when output is not a terminal"},
	{"TERM", "repl", "dumb, or unset, makes the REPL read plain lines"},
	{"HTTPS_PROXY, HTTP_PROXY, NO_PROXY", "", "the proxy of providers' requests"},
	{"OTEL_*", "serve, gateway, mcp serve", "OpenTelemetry tracing over OTLP/HTTP: OTEL_EXPORTER_OTLP_ENDPOINT (off when unset), OTEL_EXPORTER_OTLP_HEADERS, OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER and _ARG (docs/observability.md)"},
	{"NB_TRACE_CONTENT", "serve, gateway, mcp serve", "1 records messages' contents in the traces' spans (off by default)"},
}

// commandEnvironment narrows the variables of the commands that read
// fewer than every command's.
var commandEnvironment = map[string][]string{
	"version":       nil,
	"specification": nil,
	"completion":    {"NANO_BOTS_CARTRIDGES_PATH"}, // by the script, as it completes cartridges
	"security":      {"NANO_BOTS_ENCRYPTION_PASSWORD", "NB_DOTENV"},

	// The gateway's commands that only read the configuration (found by
	// --config, NB_GATEWAY_CONFIG or the default paths, with the
	// NANOBOT_* overrides) and the workspace's files. nb gateway, chat
	// (agent) and channels (whose login opens the store and the network)
	// run the assistant's bot host and keep the whole list.
	"gateway init":            gatewayConfigEnvironment, // it writes where the others read
	"gateway onboard":         gatewayConfigEnvironment,
	"gateway status":          gatewayConfigEnvironment,
	"gateway cron --help":     gatewayConfigEnvironment, // nb gateway cron's own help
	"gateway cron list":       gatewayConfigEnvironment,
	"gateway cron add":        gatewayConfigEnvironment,
	"gateway cron remove":     gatewayConfigEnvironment,
	"gateway cron enable":     gatewayConfigEnvironment,
	"gateway cron run":        gatewayConfigEnvironment, // it flags the job; the running gateway runs it
	"gateway pair":            append(slices.Clone(gatewayConfigEnvironment), "NB_BUS"),
	"gateway sessions":        gatewaySessionsEnvironment,
	"gateway sessions import": gatewaySessionsEnvironment,
	"gateway sessions export": gatewaySessionsEnvironment,
}

var (
	// gatewayConfigEnvironment is what reading the gateway's
	// configuration takes from the environment, with .env.
	gatewayConfigEnvironment = []string{"NB_GATEWAY_CONFIG", "NANOBOT_*", "NB_DOTENV"}
	// gatewaySessionsEnvironment adds the store (opened as nb's other
	// commands open it) and the bus, whose name is the sessions'
	// namespace.
	gatewaySessionsEnvironment = append(slices.Clone(gatewayConfigEnvironment),
		"NB_STORE", "NB_STORE_LEASE_TTL", "NANO_BOTS_ENCRYPTION_PASSWORD", "NB_BUS")
)

// environmentHelp lists the variables read by command ("" for all of
// nb's; "nb serve" or "serve"), for help texts. A variable of "agents"
// is read by "agents run" too.
func environmentHelp(command string) string {
	command = strings.TrimPrefix(command, "nb ")
	only, narrow := commandEnvironment[command]
	var rows []envVar
	for _, v := range environment {
		switch {
		case narrow:
			if slices.Contains(only, v.Name) {
				rows = append(rows, v)
			}
		case command == "" || v.Commands == "" || readBy(v, command):
			rows = append(rows, v)
		}
	}
	if narrow && len(rows) == 0 {
		return "Environment:\n  none: this command reads no variable of nb's.\n\n"
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].Commands == "" && rows[j].Commands != "" })
	var b strings.Builder
	b.WriteString("Environment:\n")
	for _, v := range rows {
		doc := v.Doc
		if v.Commands != "" && command == "" {
			doc += " (" + v.Commands + ")"
		}
		fmt.Fprintf(&b, "  %-34s %s\n", v.Name, doc)
	}
	b.WriteString("A .env file in the working directory fills unset variables (NB_DOTENV=0 turns it off).\n\n")
	return b.String()
}

// readBy tells whether command (agents run) reads v.
func readBy(v envVar, command string) bool {
	for _, c := range strings.Split(v.Commands, ",") {
		c = strings.TrimSpace(c)
		if command == c || strings.HasPrefix(command, c+" ") {
			return true
		}
	}
	return false
}
