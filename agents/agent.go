// Package agents serves nb's bots as agents of the agent protocol
// (docs/agent-protocol.md): every cartridge is an agent, described by an
// AgentRepr (its name, schemas and required tools, from meta and the
// optional agent block), and so is every entry of a minion file (clippy's
// format). A Runtime runs them: it validates a run's input, context and
// parameters, gives the agent the client's tools and the minions (other
// agents here, or remote ones over the protocol), turns the agent's
// events into frames, and validates the result. Transport is elsewhere
// (server/agentsrv): a Run takes frames in and gives frames out.
package agents

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/agentproto"
	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
)

// The agent types: the loops of agent.
const (
	TypeFunctions = string(agent.LoopFunctions)
	TypeReAct     = string(agent.LoopReAct)
	TypePlan      = string(agent.LoopPlan)
)

// Agent is an agent a Runtime can run: its description and the bot that
// does the work.
type Agent struct {
	// Repr is what discovery shows, with the effective schemas.
	Repr agentproto.AgentRepr
	// Type is TypeFunctions, TypeReAct or TypePlan.
	Type string
	// Bot is the cartridge made runnable: provider, tools, scripts.
	Bot *bot.Bot
	// ToolNames, when set, are the only tools of the bot the agent
	// gets (a minion file's tool_names).
	ToolNames []string
	// Minions are the agents it hands work to.
	Minions []cartridge.MinionDesc
	// MaxTasks is a planner's budget (0: the default).
	MaxTasks int
	// NoFeedback refuses input frames (a minion file's agent without
	// allow-feedback).
	NoFeedback bool
	// Source says where the agent was defined (file:line), for messages.
	Source string

	input, context, params, output *jsonschema.Resolved
	// paramPaths maps a parameter to where it goes in the provider's
	// settings.
	paramPaths map[string][]string
	// textInput and textOutput tell whether input and output are plain
	// strings (the defaults).
	textInput, textOutput bool
}

// textSchema is the default input and output schema: a string.
func textSchema() map[string]any { return map[string]any{"type": "string"} }

// FromCartridge describes the bot's cartridge as an agent. Its name is
// meta.name (else the file's name without extension); its schemas and
// type come from the agent block when there is one.
func FromCartridge(b *bot.Bot) (*Agent, error) {
	c := b.Cartridge
	d, err := c.AgentDesc()
	if err != nil {
		return nil, err
	}
	name := strings.TrimSpace(c.Meta().Name)
	if name == "" && c.Path != "" {
		name = strings.TrimSuffix(filepath.Base(c.Path), filepath.Ext(c.Path))
		name = strings.TrimSuffix(name, ".cartridge")
	}
	if name == "" {
		name = "default"
	}
	a := &Agent{Bot: b, Type: d.Type, Minions: d.Minions, MaxTasks: d.MaxTasks, Source: bot.DisplayPath(c)}
	if a.Type == "" {
		a.Type = TypeFunctions
	}
	a.Repr = agentproto.AgentRepr{Name: name, Description: c.Meta().Description, Type: a.Type,
		InputSchema: d.InputSchema, ContextSchema: d.ContextSchema, ParameterSchema: d.ParameterSchema,
		OutputSchema: d.OutputSchema, RequiredTools: d.RequiredTools}
	if err := a.compile(); err != nil {
		return nil, fmt.Errorf("%s: agent %s: %w", a.Source, name, err)
	}
	return a, nil
}

// compile fills the defaults and resolves the schemas.
func (a *Agent) compile() error {
	r := &a.Repr
	if r.InputSchema == nil {
		r.InputSchema = textSchema()
	}
	if r.OutputSchema == nil {
		r.OutputSchema = textSchema()
	}
	a.textInput = isText(r.InputSchema)
	a.textOutput = isText(r.OutputSchema)
	a.paramPaths = map[string][]string{}
	if r.ParameterSchema == nil {
		r.ParameterSchema, a.paramPaths = samplingSchema(a.Bot.Cartridge)
	} else {
		found := sampling(a.Bot.Cartridge)
		props, _ := r.ParameterSchema["properties"].(map[string]any)
		for name := range props {
			if p, ok := found[name]; ok {
				a.paramPaths[name] = p.path
			} else {
				a.paramPaths[name] = []string{name}
			}
		}
	}
	var err error
	for _, s := range []struct {
		key    string
		schema map[string]any
		out    **jsonschema.Resolved
	}{{"input_schema", r.InputSchema, &a.input}, {"context_schema", r.ContextSchema, &a.context},
		{"parameter_schema", r.ParameterSchema, &a.params}, {"output_schema", r.OutputSchema, &a.output}} {
		if *s.out, err = agentproto.CompileSchema(s.schema); err != nil {
			return fmt.Errorf("%s: %w", s.key, err)
		}
	}
	return nil
}

func isText(s map[string]any) bool {
	return s["type"] == "string" && len(s) == 1
}

// Name is the agent's name.
func (a *Agent) Name() string { return a.Repr.Name }

// settingNames are the sampling settings a client may change when the
// cartridge sets them, by provider vocabulary; integerSettings are those
// that take whole numbers.
var settingNames = []string{"temperature", "top_p", "top_k", "max_tokens", "max_completion_tokens", "presence_penalty",
	"frequency_penalty", "seed", "random_seed", "reasoning_effort", "p", "k", "min_p", "repeat_penalty", "num_predict",
	"num_ctx", "maxOutputTokens", "topP", "topK", "candidateCount", "presencePenalty", "frequencyPenalty"}

var integerSettings = map[string]bool{"top_k": true, "max_tokens": true, "max_completion_tokens": true, "seed": true,
	"random_seed": true, "k": true, "num_predict": true, "num_ctx": true, "maxOutputTokens": true, "topK": true, "candidateCount": true}

type setting struct {
	path  []string
	value any
}

// sampling finds the sampling settings the cartridge sets: at the top of
// provider.settings, in generationConfig (Gemini) or in options (Ollama).
func sampling(c *cartridge.Cartridge) map[string]setting {
	out := map[string]setting{}
	settings := c.Map("provider", "settings")
	for _, scope := range [][]string{nil, {"generationConfig"}, {"options"}} {
		m := settings
		for _, k := range scope {
			m, _ = m[k].(map[string]any)
		}
		for _, name := range settingNames {
			if v, ok := m[name]; ok && v != nil {
				if _, taken := out[name]; !taken {
					out[name] = setting{path: append(append([]string(nil), scope...), name), value: v}
				}
			}
		}
	}
	return out
}

// samplingSchema is the default parameter schema: an object whose
// properties are the sampling settings the cartridge sets, typed by
// their values; nothing else is allowed.
func samplingSchema(c *cartridge.Cartridge) (map[string]any, map[string][]string) {
	found := sampling(c)
	names := make([]string, 0, len(found))
	for n := range found {
		names = append(names, n)
	}
	sort.Strings(names)
	props := map[string]any{}
	paths := map[string][]string{}
	for _, n := range names {
		s := found[n]
		var typ string
		switch s.value.(type) {
		case string:
			typ = "string"
		case bool:
			typ = "boolean"
		case int64, float64:
			typ = "number"
			if integerSettings[n] {
				typ = "integer"
			}
		default:
			continue
		}
		props[n] = map[string]any{"type": typ, "description": fmt.Sprintf("provider.settings.%s (the cartridge's: %v)", strings.Join(s.path, "."), s.value)}
		paths[n] = s.path
	}
	return map[string]any{"type": "object", "properties": props, "additionalProperties": false}, paths
}

// settingsFor turns validated parameters into the provider settings
// they override.
func (a *Agent) settingsFor(params map[string]any) map[string]any {
	if len(params) == 0 {
		return nil
	}
	out := map[string]any{}
	for name, v := range params {
		path, ok := a.paramPaths[name]
		if !ok {
			continue
		}
		setPath(out, path, v)
	}
	return out
}

// inputText is the input as the model reads it: a string as it is,
// anything else as JSON.
func inputText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// Renamed returns a copy of a with another name (a server gives its
// cartridge id to two cartridges with the same meta.name).
func (a *Agent) Renamed(name string) *Agent {
	b := *a
	b.Repr.Name = name
	return &b
}
