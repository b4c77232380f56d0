package robopage

import (
	"fmt"
	"strings"
)

// Flavor is a shape of the tool list served by GET /.
type Flavor int

const (
	// OpenAI lists one {type: function, function: {...}} per function.
	OpenAI Flavor = iota
	// Rigging lists one object per page with its functions and parameters.
	Rigging
	// Nerve lists one group per page with an action per function.
	Nerve
)

// String is the flavor's name in ?flavor=.
func (f Flavor) String() string {
	switch f {
	case Rigging:
		return "rigging"
	case Nerve:
		return "nerve"
	}
	return "openai"
}

// ParseFlavor reads a flavor name, in any case; anything else, including
// the empty string, is the error "unknown flavor: <s>".
func ParseFlavor(s string) (Flavor, error) {
	switch strings.ToLower(s) {
	case "openai":
		return OpenAI, nil
	case "rigging":
		return Rigging, nil
	case "nerve":
		return Nerve, nil
	}
	return 0, fmt.Errorf("unknown flavor: %s", s)
}

// OpenAITool is one entry of the openai flavor.
type OpenAITool struct {
	Type     string         `json:"type"`
	Function OpenAIFunction `json:"function"`
}

// OpenAIFunction describes a function to an OpenAI-style client.
type OpenAIFunction struct {
	Name        string           `json:"name"`
	Description string           `json:"description"`
	Parameters  OpenAIParameters `json:"parameters"`
}

// OpenAIParameters is the JSON Schema of a function's arguments.
type OpenAIParameters struct {
	Type       string                    `json:"type"`
	Properties map[string]OpenAIProperty `json:"properties"`
	Required   []string                  `json:"required"`
}

// OpenAIProperty is one argument: its type and description only.
type OpenAIProperty struct {
	Type        string `json:"type"`
	Description string `json:"description"`
}

// RiggingPage is one entry of the rigging flavor.
type RiggingPage struct {
	Name        string            `json:"name"`
	Description *string           `json:"description"`
	Functions   []RiggingFunction `json:"functions"`
}

// RiggingFunction is a function of a RiggingPage.
type RiggingFunction struct {
	Name        string             `json:"name"`
	Description string             `json:"description"`
	Parameters  []RiggingParameter `json:"parameters"`
}

// RiggingParameter is an argument; the type string is spelled "str".
type RiggingParameter struct {
	Name        string   `json:"name"`
	Type        string   `json:"type"`
	Description string   `json:"description"`
	Examples    []string `json:"examples"`
}

// NerveGroup is one entry of the nerve flavor.
type NerveGroup struct {
	Name        string        `json:"name"`
	Description *string       `json:"description"`
	Actions     []NerveAction `json:"actions"`
}

// NerveAction is a function of a NerveGroup.
type NerveAction struct {
	Name           string            `json:"name"`
	Description    string            `json:"description"`
	Args           map[string]string `json:"args"`
	ExamplePayload *string           `json:"example_payload"`
	Tool           string            `json:"tool"`
}

// List returns the tools of the pages whose path contains filter in the
// given flavor, ready to encode as JSON: []OpenAITool, []RiggingPage or
// []NerveGroup.
func (l *Library) List(flavor Flavor, filter string) any {
	pages := l.Filter(filter)
	switch flavor {
	case Rigging:
		out := []RiggingPage{}
		for _, p := range pages {
			rp := RiggingPage{Name: p.Name, Description: optional(p.Description), Functions: []RiggingFunction{}}
			for _, f := range p.Functions {
				rf := RiggingFunction{Name: f.Name, Description: f.Description, Parameters: []RiggingParameter{}}
				for _, par := range f.Parameters {
					typ := par.Type
					if typ == "string" {
						typ = "str"
					}
					ex := par.Examples
					if ex == nil {
						ex = []string{}
					}
					rf.Parameters = append(rf.Parameters, RiggingParameter{Name: par.Name, Type: typ, Description: par.Description, Examples: ex})
				}
				rp.Functions = append(rp.Functions, rf)
			}
			out = append(out, rp)
		}
		return out
	case Nerve:
		out := []NerveGroup{}
		for _, p := range pages {
			g := NerveGroup{Name: p.Name, Description: optional(p.Description), Actions: []NerveAction{}}
			for _, f := range p.Functions {
				args := map[string]string{}
				for _, par := range f.Parameters {
					args[par.Name] = par.Description
				}
				g.Actions = append(g.Actions, NerveAction{Name: f.Name, Description: f.Description, Args: args, Tool: p.Name + "." + f.Name + "@robopages"})
			}
			out = append(out, g)
		}
		return out
	}
	out := []OpenAITool{}
	for _, p := range pages {
		for _, f := range p.Functions {
			params := OpenAIParameters{Type: "object", Properties: map[string]OpenAIProperty{}, Required: []string{}}
			for _, par := range f.Parameters {
				params.Properties[par.Name] = OpenAIProperty{Type: par.Type, Description: par.Description}
				if par.Required {
					params.Required = append(params.Required, par.Name)
				}
			}
			out = append(out, OpenAITool{Type: "function", Function: OpenAIFunction{Name: f.Name, Description: f.Description, Parameters: params}})
		}
	}
	return out
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
