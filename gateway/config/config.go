// Package config reads the gateway's configuration: nanobot's config.json
// schema (every key in camelCase or snake_case, ${VAR} resolved at load,
// NANOBOT_ environment overrides with __ nesting), plus nb's extensions
// (agents.defaults.cartridge, agents.defaults.budget). It finds the file,
// warns once about unknown keys with the nearest known one, and says where
// the workspace is. Turning the model settings into a cartridge is
// cartridge.go's job.
package config

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/proc"
)

// Config is the whole configuration.
type Config struct {
	Agents    Agents              `json:"agents"`
	Channels  Channels            `json:"channels"`
	Providers map[string]Provider `json:"providers"`
	Gateway   Gateway             `json:"gateway"`
	Tools     Tools               `json:"tools"`

	// Path is the file read ("" for the embedded default).
	Path string `json:"-"`
	// Workspace is the workspace folder, absolute.
	Workspace string `json:"-"`
	// Warnings are what was found odd (unknown keys), once each.
	Warnings []string `json:"-"`
	// NanobotCron is the jobs file nanobot up to v0.1.4.post5 kept
	// beside its configuration (get_cron_dir()/jobs.json), and
	// NanobotSessions the folder nanobot up to v0.1.3 kept sessions in
	// (~/.nanobot/sessions): set when the configuration read is
	// nanobot's (a config.json), "" otherwise. Newer nanobot moves them
	// into the workspace; so does nb (see cron.Store.Legacy and
	// session.Manager.Legacy).
	NanobotCron     string `json:"-"`
	NanobotSessions string `json:"-"`

	env Env // the environment Load read
	// typos are the unknown keys near a known one: path -> the known key.
	typos map[string]string
}

// Agents holds the agent's defaults.
type Agents struct {
	Defaults Defaults `json:"defaults"`
}

// Defaults are agents.defaults.
type Defaults struct {
	Workspace           string   `json:"workspace"`
	Model               string   `json:"model"`
	Provider            string   `json:"provider"`
	MaxTokens           int      `json:"maxTokens"`
	ContextWindowTokens int      `json:"contextWindowTokens"`
	Temperature         *float64 `json:"temperature"`
	MaxToolIterations   int      `json:"maxToolIterations"`
	// MemoryWindow is nanobot's memoryWindow (-1: ignored, as nanobot
	// from v0.1.4.post5 on ignores it; see Config.memoryWindow).
	MemoryWindow       int    `json:"memoryWindow"`
	ReasoningEffort    string `json:"reasoningEffort"`
	Timezone           string `json:"timezone"`
	MaxToolResultChars int    `json:"maxToolResultChars"`
	// Cartridge (nb) names a cartridge that is the assistant.
	Cartridge string `json:"cartridge"`
	// Budget (nb) bounds the tokens spent.
	Budget Budget `json:"budget"`
	// Limits (nb) bound what files and sessions give the model.
	Limits Limits `json:"limits"`
}

// Limits is agents.defaults.limits (nb): the bytes the system prompt
// takes from each bootstrap file and from memory/MEMORY.md, and those a
// memory consolidation call is sent (its conversation, each message in
// it); 0 is the default (see docs/security.md).
type Limits struct {
	PromptFileBytes           int `json:"promptFileBytes"`
	MemoryBytes               int `json:"memoryBytes"`
	ConsolidationChunkBytes   int `json:"consolidationChunkBytes"`
	ConsolidationMessageBytes int `json:"consolidationMessageBytes"`
}

// Budget is agents.defaults.budget (nb).
type Budget struct {
	SessionTokens int `json:"sessionTokens"`
	DailyTokens   int `json:"dailyTokens"`
}

// Channels are the chat platforms' settings.
type Channels struct {
	SendProgress   *bool `json:"sendProgress"`
	SendToolHints  bool  `json:"sendToolHints"`
	SendMaxRetries *int  `json:"sendMaxRetries"`
	// Each is every channel's own section (channels.<name>), keys in
	// camelCase, for the channel's package to decode.
	Each map[string]json.RawMessage `json:"-"`
}

// Progress reports channels.sendProgress (default true).
func (c Channels) Progress() bool { return c.SendProgress == nil || *c.SendProgress }

// MaxRetries reports channels.sendMaxRetries (default 3, 0–10).
func (c Channels) MaxRetries() int {
	if c.SendMaxRetries == nil {
		return 3
	}
	return min(max(*c.SendMaxRetries, 0), 10)
}

// ChannelCommon are the keys every channel section has.
type ChannelCommon struct {
	Enabled     bool     `json:"enabled"`
	AllowFrom   []string `json:"allowFrom"`
	GroupPolicy string   `json:"groupPolicy"`
}

// Channel decodes the common keys of channels.<name>.
func (c Channels) Channel(name string) (ChannelCommon, error) {
	var cc ChannelCommon
	raw, ok := c.Each[name]
	if !ok {
		return cc, nil
	}
	if err := json.Unmarshal(raw, &cc); err != nil {
		return cc, fmt.Errorf("channels.%s: %v", name, err)
	}
	return cc, nil
}

// Provider is providers.<name>.
type Provider struct {
	APIKey       string            `json:"apiKey"`
	APIBase      string            `json:"apiBase"`
	ExtraHeaders map[string]string `json:"extraHeaders"`
}

// Gateway is the gateway section.
type Gateway struct {
	Host      string    `json:"host"`
	Port      int       `json:"port"`
	Heartbeat Heartbeat `json:"heartbeat"`
	// Bus (nb) is the bus replicas share, nats://… (--bus and NB_BUS
	// win); "" is the in-process bus of one gateway.
	Bus string `json:"bus"`
	// Store (nb) is the conversation store replicas share, postgres://…
	// (--store and NB_STORE win): the chat sessions go there; "" keeps
	// them in the workspace's files.
	Store string `json:"store"`
	// Guests (nb) is what the guests' turns may use: the senders the
	// owner paired, or that allowFrom's "*" admits.
	Guests Guests `json:"guests"`
	// Limits (nb) bound what strangers and floods can take from the
	// gateway.
	Limits GatewayLimits `json:"limits"`
}

// Guests is gateway.guests (nb).
type Guests struct {
	// Tools names the tools a guest's turn is offered; absent, the
	// gateway's default (the read tools, the web, message). cron is never
	// offered to guests; exec runs only sandboxed for them.
	Tools []string `json:"tools"`
}

// GatewayLimits is gateway.limits (nb); zero or absent keys take the
// defaults.
type GatewayLimits struct {
	// ClientConns bounds the listener's open connections from one
	// address (default 64).
	ClientConns int `json:"clientConns"`
	// Conns bounds the listener's open connections in all (default
	// 1,024, and half the process's limit of open files at most).
	Conns int `json:"conns"`
	// MediaBytes bounds the workspace's media folder, where the channels
	// store what people send: past it the oldest files are removed
	// (default DefaultMediaBytes).
	MediaBytes int64 `json:"mediaBytes"`
	// QueuedPerChat bounds the messages of one chat waiting for the
	// agent (default DefaultQueuedPerChat): past it they are dropped and
	// the chat is told once.
	QueuedPerChat int `json:"queuedPerChat"`
	// CronJobs bounds the jobs of cron/jobs.json (default
	// DefaultCronJobs): the cron tool and nb gateway cron add refuse more.
	CronJobs int `json:"cronJobs"`
}

// Defaults of gateway.limits.
const (
	DefaultMediaBytes    = 1 << 30
	DefaultQueuedPerChat = 20
	DefaultCronJobs      = 1000
)

// Media is gateway.limits.mediaBytes, or its default.
func (l GatewayLimits) Media() int64 {
	if l.MediaBytes <= 0 {
		return DefaultMediaBytes
	}
	return l.MediaBytes
}

// Queued is gateway.limits.queuedPerChat, or its default.
func (l GatewayLimits) Queued() int {
	if l.QueuedPerChat <= 0 {
		return DefaultQueuedPerChat
	}
	return l.QueuedPerChat
}

// Cron is gateway.limits.cronJobs, or its default.
func (l GatewayLimits) Cron() int {
	if l.CronJobs <= 0 {
		return DefaultCronJobs
	}
	return l.CronJobs
}

// Heartbeat is gateway.heartbeat.
type Heartbeat struct {
	Enabled            *bool `json:"enabled"`
	IntervalS          int   `json:"intervalS"`
	KeepRecentMessages int   `json:"keepRecentMessages"`
}

// Tools is the tools section.
type Tools struct {
	Web                 WebTools             `json:"web"`
	Exec                ExecTool             `json:"exec"`
	RestrictToWorkspace *bool                `json:"restrictToWorkspace"`
	MCPServers          map[string]MCPServer `json:"mcpServers"`
	SSRFWhitelist       []string             `json:"ssrfWhitelist"`
}

// WebTools is tools.web.
type WebTools struct {
	Proxy  string    `json:"proxy"`
	Search WebSearch `json:"search"`
}

// WebSearch is tools.web.search.
type WebSearch struct {
	Provider   string `json:"provider"`
	APIKey     string `json:"apiKey"`
	BaseURL    string `json:"baseUrl"`
	MaxResults int    `json:"maxResults"`
}

// ExecTool is tools.exec.
type ExecTool struct {
	Enable     *bool  `json:"enable"`
	Timeout    int    `json:"timeout"`
	PathAppend string `json:"pathAppend"`
	Sandbox    string `json:"sandbox"`
}

// MCPServer is tools.mcpServers.<name>, Claude Desktop's shape.
type MCPServer struct {
	Type         string            `json:"type"`
	Command      string            `json:"command"`
	Args         []string          `json:"args"`
	Env          map[string]string `json:"env"`
	URL          string            `json:"url"`
	Headers      map[string]string `json:"headers"`
	ToolTimeout  int               `json:"toolTimeout"`
	EnabledTools []string          `json:"enabledTools"`
}

// Env is the environment loading reads (NAME=value entries, as
// os.Environ gives): ${VAR}, NANOBOT_ overrides, HOME and the XDG folders.
type Env []string

func (e Env) get(name string) string {
	v, _ := proc.Lookup(e, name)
	return v
}

// Lookup finds a variable.
func (e Env) Lookup(name string) (string, bool) { return proc.Lookup(e, name) }

// Find says which file to read: flag, else NB_GATEWAY_CONFIG, else
// $XDG_CONFIG_HOME/nb/gateway.json, else ~/.nanobot/config.json, each
// when it exists (flag and NB_GATEWAY_CONFIG must). "" means none: the
// embedded default.
func Find(flag string, env Env) (string, error) {
	for _, p := range []struct{ path, from string }{{flag, "--config"}, {env.get("NB_GATEWAY_CONFIG"), "NB_GATEWAY_CONFIG"}} {
		if p.path == "" {
			continue
		}
		path := expandHome(p.path, env)
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("%s %s: %w", p.from, p.path, errors.Unwrap(err))
		}
		return path, nil
	}
	for _, path := range []string{NBPath(env), filepath.Join(env.get("HOME"), ".nanobot", "config.json")} {
		if path == "" {
			continue
		}
		if _, err := os.Stat(path); err == nil {
			return path, nil
		}
	}
	return "", nil
}

// Target says which file nb gateway init writes: flag, else
// NB_GATEWAY_CONFIG (the file the other commands will read, as Find
// does), else NBPath ("" when neither XDG_CONFIG_HOME nor HOME is set).
// from names where it came from: "--config", "NB_GATEWAY_CONFIG", or ""
// for the default.
func Target(flag string, env Env) (path, from string) {
	for _, p := range []struct{ path, from string }{{flag, "--config"}, {env.get("NB_GATEWAY_CONFIG"), "NB_GATEWAY_CONFIG"}} {
		if p.path != "" {
			return expandHome(p.path, env), p.from
		}
	}
	return NBPath(env), ""
}

// NBPath is nb's own configuration file: $XDG_CONFIG_HOME/nb/gateway.json.
func NBPath(env Env) string {
	base := env.get("XDG_CONFIG_HOME")
	if base == "" {
		if home := env.get("HOME"); home != "" {
			base = filepath.Join(home, ".config")
		}
	}
	if base == "" {
		return ""
	}
	return filepath.Join(base, "nb", "gateway.json")
}

// DefaultWorkspace is the workspace without a configuration:
// $XDG_DATA_HOME/nb/gateway.
func DefaultWorkspace(env Env) string {
	base := env.get("XDG_DATA_HOME")
	if base == "" {
		base = filepath.Join(env.get("HOME"), ".local", "share")
	}
	return filepath.Join(base, "nb", "gateway")
}

func expandHome(p string, env Env) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		return filepath.Join(env.get("HOME"), p[1:])
	}
	return p
}

//go:embed default.json
var defaultJSON []byte

// Starter is the commented configuration nb gateway init writes.
//
//go:embed starter.jsonc
var Starter []byte

// Load reads path ("" for the embedded default), applies the environment
// and the workspace flag ("" keeps the configured one).
func Load(path, workspace string, env Env) (*Config, error) {
	data := defaultJSON
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("gateway configuration: %w", err)
		}
	}
	name := path
	if name == "" {
		name = "the default configuration"
	}
	data = stripComments(data)
	var raw any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%s: not valid JSON: %v", name, jsonError(data, err))
	}
	root, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: the configuration must be a JSON object", name)
	}
	root = normalise(root, "").(map[string]any)
	if err := overrides(root, env); err != nil {
		return nil, err
	}
	if err := substitute(root, "", env); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	c := &Config{Path: path, env: env}
	c.typos = map[string]string{}
	c.Warnings = unknownKeys(root, reflect.TypeOf(Config{}), "", name, c.typos)
	b, _ := json.Marshal(root)
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("%s: %v", name, typeError(err))
	}
	if ch, ok := root["channels"].(map[string]any); ok {
		c.Channels.Each = map[string]json.RawMessage{}
		for k, v := range ch {
			if m, ok := v.(map[string]any); ok {
				b, _ := json.Marshal(m)
				c.Channels.Each[k] = b
			}
		}
	}
	switch {
	case workspace != "":
		c.Workspace = expandHome(workspace, env)
	case c.Agents.Defaults.Workspace != "":
		c.Workspace = expandHome(c.Agents.Defaults.Workspace, env)
	case path != "" && filepath.Base(filepath.Dir(path)) == ".nanobot":
		c.Workspace = filepath.Join(filepath.Dir(path), "workspace")
	default:
		c.Workspace = DefaultWorkspace(env)
	}
	abs, err := filepath.Abs(c.Workspace)
	if err != nil {
		return nil, fmt.Errorf("workspace %s: %w", c.Workspace, err)
	}
	c.Workspace = abs
	if path != "" && filepath.Base(path) == "config.json" {
		// nanobot's get_data_dir() is its configuration's folder.
		if dir, err := filepath.Abs(filepath.Dir(path)); err == nil {
			c.NanobotCron = filepath.Join(dir, "cron", "jobs.json")
		}
		if home := env.get("HOME"); home != "" {
			c.NanobotSessions = filepath.Join(home, ".nanobot", "sessions")
		}
	}
	c.Warnings = append(c.Warnings, c.memoryWindow()...)
	for _, name := range c.Gateway.Guests.Tools {
		if name == "cron" {
			c.Warnings = append(c.Warnings, fmt.Sprintf("%s: gateway.guests.tools: cron is never offered to guests (it changes the owner's jobs): remove it", name))
		}
	}
	return c, nil
}

// memoryWindow reads agents.defaults.memoryWindow of a nanobot
// configuration as the nanobot it was written for reads it: nanobot up
// to v0.1.4.post4 consolidates every memoryWindow messages and its
// configurations have no contextWindowTokens; from v0.1.4.post5 on,
// memoryWindow is ignored (consolidation goes by tokens), and onboard
// writes contextWindowTokens. So beside contextWindowTokens it is
// ignored (MemoryWindow becomes -1: no count of messages); alone, it is
// kept. Either way, a hint says what the other nanobot does.
func (c *Config) memoryWindow() []string {
	d := &c.Agents.Defaults
	if c.NanobotCron == "" || d.MemoryWindow == 0 {
		return nil
	}
	name := c.Path
	if d.ContextWindowTokens > 0 {
		d.MemoryWindow = -1
		return []string{fmt.Sprintf("%s: agents.defaults.memoryWindow is ignored beside contextWindowTokens, as nanobot from v0.1.4.post5 on ignores it (memory is consolidated by tokens): it can be removed", name)}
	}
	return []string{fmt.Sprintf("%s: agents.defaults.memoryWindow: memory is consolidated every %d messages, as nanobot up to v0.1.4.post4 does; nanobot v0.1.4.post5 ignores memoryWindow without contextWindowTokens (nanobot onboard adds it)", name, d.MemoryWindow)}
}

// freeKeys are the maps whose keys are names (servers, variables,
// headers) and stay as written.
var freeKeys = map[string]bool{"mcpServers": true, "env": true, "headers": true, "extraHeaders": true, "metadata": true, "providers": true,
	"groups": true, "lidMappings": true} // channels.mochat.groups' ids, channels.whatsapp.lidMappings' JIDs

// normalise turns every key into camelCase (nanobot accepts both), except
// the names under freeKeys.
func normalise(v any, parent string) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, val := range t {
			key := k
			if !freeKeys[parent] {
				key = camel(k)
			}
			child := key
			if freeKeys[parent] {
				child = "" // a named entry: its keys are schema keys again
			}
			out[key] = normalise(val, child)
		}
		return out
	case []any:
		for i := range t {
			t[i] = normalise(t[i], "")
		}
	}
	return v
}

// camel converts snake_case to camelCase ("api_key" -> "apiKey").
func camel(s string) string {
	if !strings.Contains(s, "_") || strings.HasPrefix(s, "_") {
		return s
	}
	parts := strings.Split(s, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// overrides applies NANOBOT_A__B__C=value variables: value is JSON when it
// parses as JSON, else text.
func overrides(root map[string]any, env Env) error {
	var names []string
	for _, kv := range env {
		if name, _, ok := strings.Cut(kv, "="); ok {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		rest, ok := strings.CutPrefix(name, "NANOBOT_")
		if !ok || rest == "" {
			continue
		}
		val, _ := env.Lookup(name)
		segs := strings.Split(rest, "__")
		m := root
		for i, s := range segs {
			key := camel(strings.ToLower(s))
			if i == len(segs)-1 {
				var v any
				dec := json.NewDecoder(strings.NewReader(val))
				dec.UseNumber()
				if dec.Decode(&v) != nil || dec.More() {
					v = val
				}
				m[key] = v
				break
			}
			next, ok := m[key].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[key] = next
			}
			m = next
		}
	}
	return nil
}

var varRef = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`) })

// substitute resolves ${VAR} in every string; a missing variable is an
// error naming it and the key.
func substitute(v any, path string, env Env) error {
	switch t := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			p := join(path, k)
			if s, ok := t[k].(string); ok {
				r, err := resolve(s, p, env)
				if err != nil {
					return err
				}
				t[k] = r
				continue
			}
			if err := substitute(t[k], p, env); err != nil {
				return err
			}
		}
	case []any:
		for i := range t {
			p := fmt.Sprintf("%s[%d]", path, i)
			if s, ok := t[i].(string); ok {
				r, err := resolve(s, p, env)
				if err != nil {
					return err
				}
				t[i] = r
				continue
			}
			if err := substitute(t[i], p, env); err != nil {
				return err
			}
		}
	}
	return nil
}

func resolve(s, path string, env Env) (string, error) {
	var missing string
	out := varRef().ReplaceAllStringFunc(s, func(ref string) string {
		name := ref[2 : len(ref)-1]
		v, ok := env.Lookup(name)
		if !ok && missing == "" {
			missing = name
		}
		return v
	})
	if missing != "" {
		return "", fmt.Errorf("%s: the environment variable %s is not set: export it, or put it in a .env file", path, missing)
	}
	return out, nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// unknownKeys lists the keys the schema does not know, with the nearest
// known one, as warnings naming file. channels.<name> sections belong to
// the channels and are checked by them (UnknownKeys, from each channel's
// Config).
// The typos (unknown keys near a known one) are kept in typos: path -> the
// known key's path.
func unknownKeys(v any, t reflect.Type, path, file string, typos map[string]string) []string {
	var out []string
	for _, u := range UnknownKeys(v, t, path) {
		msg := fmt.Sprintf("%s: %s: unknown key, ignored", file, u.Path)
		if u.Near != "" {
			msg += fmt.Sprintf(": did you mean %q?", u.Near)
			parent, _, _ := cutLast(u.Path, ".")
			typos[u.Path] = join(parent, u.Near)
		}
		out = append(out, msg)
	}
	return out
}

// Unknown is a key a schema does not know.
type Unknown struct {
	// Path is the key's dotted path ("channels.telegram.alowFrom").
	Path string
	// Near is the known key nearest to it, "" when none is near: most
	// likely what was meant.
	Near string
}

// UnknownKeys lists, sorted, the keys of v (JSON decoded into maps, keys
// in camelCase as Load leaves them) that t does not know: t is a struct
// whose json tags are its keys, and its fields' structs and maps are
// checked too. path is v's own path. A channels section's platforms are
// not checked here: each channel checks its own with its Config.
func UnknownKeys(v any, t reflect.Type, path string) []Unknown {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []Unknown
	switch t.Kind() {
	case reflect.Map:
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, UnknownKeys(m[k], t.Elem(), join(path, k))...)
		}
		return out
	case reflect.Struct:
	default:
		return nil
	}
	known := map[string]reflect.Type{}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "" || tag == "-" {
			continue
		}
		known[tag] = f.Type
		names = append(names, tag)
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		ft, ok := known[k]
		if !ok {
			if t == reflect.TypeOf(Channels{}) {
				continue // a channel's section
			}
			out = append(out, Unknown{Path: join(path, k), Near: cartridge.Nearest(k, names)})
			continue
		}
		out = append(out, UnknownKeys(m[k], ft, join(path, k))...)
	}
	return out
}

// jsonError adds the line of a syntax error.
func jsonError(data []byte, err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line := 1 + bytes.Count(data[:min(int(se.Offset), len(data))], []byte("\n"))
		return fmt.Sprintf("line %d: %v", line, err)
	}
	return err.Error()
}

// typeError says which key has a value of the wrong kind.
func typeError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%s: must be %s, not %s", te.Field, kindName(te.Type), te.Value)
	}
	return err.Error()
}

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "text"
	case reflect.Slice:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.Kind().String()
}

// stripComments blanks // and /* */ comments outside strings (nb gateway
// init writes a commented file; nanobot's own files have none), keeping
// every newline so that error lines stay right.
func stripComments(data []byte) []byte {
	if !bytes.Contains(data, []byte("/")) {
		return data
	}
	out := bytes.Clone(data)
	inString, escaped := false, false
	for i := 0; i < len(out); i++ {
		c := out[i]
		switch {
		case inString:
			if escaped {
				escaped = false
			} else if c == '\\' {
				escaped = true
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '/' && i+1 < len(out) && out[i+1] == '/':
			for ; i < len(out) && out[i] != '\n'; i++ {
				out[i] = ' '
			}
		case c == '/' && i+1 < len(out) && out[i+1] == '*':
			out[i], out[i+1] = ' ', ' '
			for i += 2; i < len(out) && !(out[i] == '*' && i+1 < len(out) && out[i+1] == '/'); i++ {
				if out[i] != '\n' {
					out[i] = ' '
				}
			}
			if i+1 < len(out) {
				out[i], out[i+1] = ' ', ' '
				i++
			}
		}
	}
	return out
}

// cutLast is strings.Cut at the last sep: "" and s when there is none.
func cutLast(s, sep string) (before, after string, found bool) {
	if i := strings.LastIndex(s, sep); i >= 0 {
		return s[:i], s[i+len(sep):], true
	}
	return "", s, false
}
