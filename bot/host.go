package bot

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/builtin"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/internal/metric"
	"github.com/nbots/nb/proc"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/robopage"
	"github.com/nbots/nb/state"
)

// Host is what the process lends the bots it runs. Nothing below cmd/
// reads the process environment: the command line fills a Host from its
// own, a server from its configuration.
type Host struct {
	// Environ is the environment (NAME=value entries, as os.Environ
	// gives): ENV/… references of trusted cartridges, the NANO_BOTS_*
	// settings, and the allow-listed variables of children.
	Environ []string
	// AllowHostCredentials lets providers use the host's own credential
	// files (Google's application-default credentials, key files named by
	// a path). The terminal allows it; a server allows it only for the
	// cartridges of its operator.
	AllowHostCredentials bool
	// AllowMCP lets cartridges start their MCP servers (programs run on
	// this machine, remote servers reached with the cartridge's headers).
	// The terminal and nb mcp serve allow it for the cartridges their
	// user names; a server allows it only for its operator's cartridges,
	// never for one a client sent. A cartridge with an mcp key on a host
	// that does not allow it is refused.
	AllowMCP bool
	// MCPStderr, when set, receives what MCP servers write on their
	// standard error, each line prefixed with the server's name.
	MCPStderr io.Writer
	// ForceSandbox runs every function sandboxed, whatever the cartridge
	// says.
	ForceSandbox bool
	// FennelCacheDir keeps compiled Fennel across runs; "" keeps it in
	// memory only.
	FennelCacheDir string
	// HTTPClient talks to providers; nil is provider.DefaultHTTPClient.
	HTTPClient *http.Client
	// Retry is the providers' retry policy; nil is provider.DefaultRetryPolicy.
	Retry *provider.RetryPolicy
	// Metrics are the labels of the bot's provider calls in nb's metrics
	// (package internal/metric): its catalog's id for the cartridge; an
	// empty Model is the cartridge's. A server sets Model for a cartridge
	// its client sent, whose model is the client's text.
	Metrics metric.ProviderLabels
	// Robopages runs the robopages of the host's bots: one executor per
	// process bounds the calls in progress across bots. nil gives each bot
	// one of its own, from Environ.
	Robopages *robopage.Executor
	// Warn receives one-line warnings (a robopage skipped, a setting
	// ignored); nil drops them.
	Warn func(msg string)
	// Builtins tunes the built-in tools: web_fetch's resolver and dialer,
	// web_search's client and address, bubblewrap's path (tests use them
	// to need no network). The bot sets Environ, Spawn and Depth itself.
	Builtins builtin.Options
	// Store keeps the conversations of every cartridge; nil keeps each
	// cartridge's in files (see StateStore).
	Store state.Store
	// EventLog, when set, logs every exchange's events at debug level
	// (nb serve's log): their kind and figures, nb's own notices whole,
	// and of what users and models wrote only the length.
	EventLog *slog.Logger
}

// Getenv returns the value of name in the host's environment, "" when unset.
func (h Host) Getenv(name string) string {
	v, _ := proc.Lookup(h.Environ, name)
	return v
}

// LookupEnv resolves the ENV references of the host's own cartridges.
func (h Host) LookupEnv(name string) (string, bool) {
	return proc.Lookup(h.Environ, name)
}

func (h Host) warn(msg string) {
	if h.Warn != nil {
		h.Warn(msg)
	}
}

// CartridgeEnv is what cartridge lookup reads from the host's environment.
func (h Host) CartridgeEnv() cartridge.Env {
	return cartridge.Env{
		CartridgesPath:      h.Getenv("NANO_BOTS_CARTRIDGES_PATH"),
		CartridgesDirectory: h.Getenv("NANO_BOTS_CARTRIDGES_DIRECTORY"),
		DataHome:            h.Getenv("XDG_DATA_HOME"),
		Home:                h.Getenv("HOME"),
	}
}

// StateEnv is what the state root depends on in the host's environment.
func (h Host) StateEnv() state.Env {
	return state.Env{
		StatePath:      h.Getenv("NANO_BOTS_STATE_PATH"),
		StateDirectory: h.Getenv("NANO_BOTS_STATE_DIRECTORY"),
		StateHome:      h.Getenv("XDG_STATE_HOME"),
		Home:           h.Getenv("HOME"),
	}
}

// Load finds a cartridge by name (a path, a name without its extension,
// or a name in the cartridge folders) and loads it with the host's
// environment; "-" is the default cartridge.
func (h Host) Load(name string) (*cartridge.Cartridge, error) {
	if name == "-" {
		return cartridge.Default(h.LookupEnv), nil
	}
	path, err := cartridge.Find(name, h.CartridgeEnv())
	if err != nil {
		return nil, err
	}
	return cartridge.Load(path, h.LookupEnv)
}

// Password is NANO_BOTS_ENCRYPTION_PASSWORD: states are encrypted with it
// when it is set.
func (h Host) Password() string { return h.Getenv("NANO_BOTS_ENCRYPTION_PASSWORD") }

// StateStore is the store of a cartridge's conversations on this host:
// the host's Store, else files under the cartridge's state.path (or
// NANO_BOTS_STATE_PATH, or the XDG state folder), encrypted when
// NANO_BOTS_ENCRYPTION_PASSWORD is set.
func (h Host) StateStore(c *cartridge.Cartridge) state.Store {
	if h.Store != nil {
		return h.Store
	}
	root := state.RootFrom(c.String("state", "path"), c.String("state", "directory"), h.StateEnv())
	p := state.Files{Root: root}
	if pw := h.Password(); pw != "" {
		p.Cipher = state.NewCipher(pw)
	}
	return p
}

// EndUser is the end-user identity of a conversation: a non-blank
// provider.settings.user (for any provider, as the specification says),
// else requested (a server's client), else NANO_BOTS_END_USER, else
// "unknown".
func (h Host) EndUser(c *cartridge.Cartridge, requested string) string {
	if s := strings.TrimSpace(c.String("provider", "settings", "user")); s != "" {
		return s
	}
	if s := strings.TrimSpace(requested); s != "" {
		return s
	}
	if s := strings.TrimSpace(h.Getenv("NANO_BOTS_END_USER")); s != "" {
		return s
	}
	return "unknown"
}

// historyBudget is NANO_BOTS_HISTORY_BUDGET; a value that is not a
// positive number is reported and ignored.
func (h Host) historyBudget() int {
	v := strings.TrimSpace(h.Getenv("NANO_BOTS_HISTORY_BUDGET"))
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		h.warn("NANO_BOTS_HISTORY_BUDGET=" + strconv.Quote(v) + " is not a positive number of tokens: ignored")
		return 0
	}
	return n
}

// StateBot identifies a cartridge's states.
func StateBot(c *cartridge.Cartridge) state.Bot {
	m := c.Meta()
	return state.Bot{Author: m.Author, Name: m.Name, Version: m.Version}
}

// logEvent logs one event of an exchange at debug level (see
// Host.EventLog).
func (h Host) logEvent(ev agent.Event) {
	if h.EventLog == nil || !h.EventLog.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	attrs := []any{"kind", ev.Kind.String()}
	if ev.Round > 0 {
		attrs = append(attrs, "round", ev.Round)
	}
	if ev.Call != nil {
		attrs = append(attrs, "tool", ev.Call.Name, "call", ev.Call.ID)
	}
	switch ev.Kind {
	case agent.TextDelta, agent.Answer, agent.Reasoning, agent.UserInput, agent.SteeringInjected, agent.Feedback, agent.ToolOutput:
		attrs = append(attrs, "chars", len(ev.Text)) // what users and models wrote stays out of the log
	case agent.RoundStart:
		attrs = append(attrs, "provider", ev.Provider, "model", ev.Model, "context_tokens", ev.ContextTokens, "context_budget", ev.ContextBudget)
	case agent.RoundEnd:
		attrs = append(attrs, "input_tokens", ev.Usage.InputTokens, "output_tokens", ev.Usage.OutputTokens, "cache_read_tokens", ev.Usage.CacheReadTokens, "calls", len(ev.Calls))
	case agent.ToolEnd:
		attrs = append(attrs, "is_error", ev.IsError)
	case agent.Warning:
		attrs = append(attrs, "text", ev.Text, "context_tokens", ev.ContextTokens, "context_budget", ev.ContextBudget)
	default:
		if ev.Text != "" {
			attrs = append(attrs, "text", ev.Text)
		}
		if ev.Err != nil && ev.Kind != agent.Error {
			attrs = append(attrs, "error", ev.Err.Error())
		}
	}
	h.EventLog.Debug("agent event", attrs...)
}
