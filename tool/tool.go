// Package tool defines what the agent loop can call: a Tool has a Spec
// that is offered to the model and a Run method that executes one call.
// Cartridge functions (Lua, Fennel, Clojure), robopages, MCP servers and
// built-in tools all implement this one interface.
package tool

import (
	"context"
	"strings"
)

// Spec is what the model is told about a tool.
type Spec struct {
	// Name is the tool's name as the cartridge (or page) spells it.
	Name string `json:"name"`
	// Description helps the model decide when to call the tool.
	Description string `json:"description,omitempty"`
	// Parameters is a JSON Schema with an object root. Never nil once a
	// tool is registered: an absent schema becomes {type: object, properties: {}}.
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
	// can return a table); a returned error is reported to the model as the
	// tool's result, it does not stop the conversation.
	Run(ctx context.Context, call Call) (any, error)
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

// Set is a collection of tools looked up by MatchName.
type Set struct {
	tools []Tool
	index map[string]int
}

// Add registers t; a later tool with the same matched name replaces the earlier one.
func (s *Set) Add(t Tool) {
	if s.index == nil {
		s.index = map[string]int{}
	}
	key := MatchName(t.Spec().Name)
	if i, ok := s.index[key]; ok {
		s.tools[i] = t
		return
	}
	s.index[key] = len(s.tools)
	s.tools = append(s.tools, t)
}

// Lookup finds the tool a provider's call names.
func (s *Set) Lookup(name string) (Tool, bool) {
	if s == nil {
		return nil, false
	}
	i, ok := s.index[MatchName(name)]
	if !ok {
		return nil, false
	}
	return s.tools[i], true
}

// Specs lists the tools' specs in registration order.
func (s *Set) Specs() []Spec {
	if s == nil {
		return nil
	}
	out := make([]Spec, len(s.tools))
	for i, t := range s.tools {
		out[i] = t.Spec()
	}
	return out
}

// Len is the number of tools.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.tools)
}
