// Package tool defines what the agent loop can call: a Tool has a Spec
// that is offered to the model and a Run method that executes one call.
// Cartridge functions (Lua, Fennel, Clojure), robopages, MCP servers and
// built-in tools all implement this one interface.
package tool

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/nbots/nb/media"
)

// Spec is what the model is told about a tool.
type Spec struct {
	// Name is the tool's name as the cartridge (or page) spells it.
	Name string `json:"name"`
	// Description helps the model decide when to call the tool.
	Description string `json:"description,omitempty"`
	// Parameters is a JSON Schema with an object root. Never nil once a
	// tool is registered: an absent schema becomes {type: object, properties: {}}.
	// It is read-only once Spec returns it: a tool may return the same
	// map at every call (built once: a turn asks every tool for its spec),
	// and providers may keep its encoding for as long as the same map
	// comes back; a tool whose schema changes returns a new map.
	Parameters map[string]any `json:"parameters"`
}

// Call is one request of the model to run a tool.
type Call struct {
	// ID is the provider's call id; empty for providers without ids.
	ID string `json:"id,omitempty"`
	// Name is the tool name as the provider sent it (it may differ from the
	// cartridge's spelling: get_current_weather for get-current-weather).
	Name string `json:"name"`
	// Arguments are the decoded arguments; never nil.
	Arguments map[string]any `json:"arguments"`
}

// Tool is something the agent can run on the model's behalf.
type Tool interface {
	// Spec describes the tool to the model.
	Spec() Spec
	// Run executes one call. The output may be any JSON value (a Lua tool
	// can return a table) or a *Result (text with images, or an error the
	// tool reports as its result); a returned error is reported to the
	// model as the tool's result, it does not stop the conversation.
	Run(ctx context.Context, call Call) (any, error)
}

// Result is a tool output with more than a JSON value: images (an MCP
// tool's screenshot), or a failure the tool reports as its answer (an MCP
// result with isError).
type Result struct {
	// Text is the output's text.
	Text string `json:"text"`
	// Images go to providers that take images in tool results; others get
	// a note in the text.
	Images []media.Image `json:"images,omitempty"`
	// IsError marks the output as the report of a failure.
	IsError bool `json:"is_error,omitempty"`
}

// Limits bound the output of one tool that the model sees (the feedback
// and the state keep it whole); zero fields take the agent's defaults.
type Limits struct {
	Chars, Lines int
	// Tail keeps the end of an output over Chars (the agent-loop
	// reference's tail mode: grep, glob, the editing tools), instead of
	// its head and tail.
	Tail bool
}

// Limited is implemented by tools whose output the model should see cut
// to limits of their own (read_file, exec, grep...).
type Limited interface {
	OutputLimits() Limits
}

// ReadOnly is implemented by tools that change nothing (read_file, grep,
// list_dir...). When ReadOnly returns true the agent runs the tool
// without asking, even when the cartridge's tools are confirmable.
type ReadOnly interface {
	ReadOnly() bool
}

// DefaultParameters is the schema of a tool that declares none.
func DefaultParameters() map[string]any {
	return map[string]any{"type": "object", "properties": map[string]any{}}
}

// MatchName reduces a tool name to the form used to match a provider's
// call to a cartridge tool: lower case, with runs of spaces, dashes and
// other separators turned into one underscore. So get-current-weather,
// get_current_weather and "Get Current Weather" are the same tool.
func MatchName(name string) string {
	var b strings.Builder
	sep := false
	for _, r := range strings.ToLower(strings.TrimSpace(name)) {
		switch {
		case r == '-' || r == ' ' || r == '\t':
			sep = true
		case r == '_' || r == '.' || r == '/' || r == ':':
			if r == '_' {
				sep = true
			}
		default:
			if sep && b.Len() > 0 {
				b.WriteByte('_')
			}
			sep = false
			b.WriteRune(r)
		}
	}
	return b.String()
}

// maxNameLen is the longest function name every provider accepts
// (OpenAI, Anthropic and Gemini all stop at 64).
const maxNameLen = 64

// ProviderName returns name in a form every provider accepts as a
// function name: ASCII letters, digits, '_' and '-' (anything else
// becomes '_'), starting with a letter or '_', at most 64 characters (a
// longer name keeps its first 55 and a hash of the whole, so two long
// names stay apart). A valid name is returned unchanged, so cartridges
// that worked keep their names.
func ProviderName(name string) string {
	var b strings.Builder
	for i, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '_':
			b.WriteRune(r)
		case r >= '0' && r <= '9', r == '-':
			if i == 0 {
				b.WriteByte('_')
			}
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	out := b.String()
	if out == "" {
		out = "_"
	}
	if len(out) > maxNameLen {
		sum := sha256.Sum256([]byte(name))
		out = out[:maxNameLen-9] + "_" + hex.EncodeToString(sum[:4])
	}
	return out
}

// Set is a collection of tools, each offered to the model under a name
// every provider accepts (ProviderName, made unique within the set) and
// looked up by that name or by MatchName.
type Set struct {
	tools []Tool
	wire  []string       // the name offered to the model, per tool
	index map[string]int // MatchName -> tool
	names map[string]int // wire name -> tool
}

// Add registers t; a later tool with the same matched name replaces the
// earlier one. A tool whose provider name is taken by another tool gets
// a suffix (_2, _3...), in the order tools are added, so the names a
// cartridge's tools receive do not change from one run to the next.
func (s *Set) Add(t Tool) {
	if s.index == nil {
		s.index = map[string]int{}
		s.names = map[string]int{}
	}
	name := t.Spec().Name
	key := MatchName(name)
	if i, ok := s.index[key]; ok {
		s.tools[i] = t
		return
	}
	wire := ProviderName(name)
	for n := 2; ; n++ {
		if _, taken := s.names[wire]; !taken {
			break
		}
		suffix := "_" + strconv.Itoa(n)
		base := ProviderName(name)
		if len(base)+len(suffix) > maxNameLen {
			base = base[:maxNameLen-len(suffix)]
		}
		wire = base + suffix
	}
	s.index[key] = len(s.tools)
	s.names[wire] = len(s.tools)
	s.tools = append(s.tools, t)
	s.wire = append(s.wire, wire)
}

// Clone is a copy of s to add to without changing s: the same tools
// under the same names as adding them again in order would give, without
// asking each tool for its Spec again (a turn's set is the bot's set and
// a few tools of the turn's).
func (s *Set) Clone() *Set {
	out := &Set{}
	if s == nil || len(s.tools) == 0 {
		return out
	}
	out.tools = append(make([]Tool, 0, len(s.tools)+4), s.tools...)
	out.wire = append(make([]string, 0, len(s.wire)+4), s.wire...)
	out.index = make(map[string]int, len(s.index)+4)
	for k, v := range s.index {
		out.index[k] = v
	}
	out.names = make(map[string]int, len(s.names)+4)
	for k, v := range s.names {
		out.names[k] = v
	}
	return out
}

// Lookup finds the tool a provider's call names: by the name it was
// offered under, else by MatchName.
func (s *Set) Lookup(name string) (Tool, bool) {
	if s == nil {
		return nil, false
	}
	if i, ok := s.names[name]; ok {
		return s.tools[i], true
	}
	i, ok := s.index[MatchName(name)]
	if !ok {
		return nil, false
	}
	return s.tools[i], true
}

// Specs lists the tools' specs in registration order, each under the
// name the model is offered.
func (s *Set) Specs() []Spec {
	if s == nil {
		return nil
	}
	out := make([]Spec, len(s.tools))
	for i, t := range s.tools {
		out[i] = t.Spec()
		out[i].Name = s.wire[i]
	}
	return out
}

// Tools lists the tools in registration order.
func (s *Set) Tools() []Tool {
	if s == nil {
		return nil
	}
	return append([]Tool(nil), s.tools...)
}

// Len is the number of tools.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.tools)
}
