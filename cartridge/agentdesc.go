package cartridge

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

// AgentTypes are the kinds of agent a cartridge can be: functions (the
// provider's tool calling, the default), react (a text ReAct loop) and
// plan (a planner that hands tasks to tools and minions).
var AgentTypes = []string{"functions", "react", "plan"}

// AgentDesc is a cartridge's optional top-level agent block (an nb
// extension of the specification), which says how the cartridge is
// served as an agent of the agent protocol:
//
//	agent:
//	  type: plan                 # functions (default), react or plan
//	  input-schema: {...}        # JSON Schema of the input (default: a string)
//	  context-schema: {...}      # JSON Schema of the context (default: any)
//	  parameter-schema: {...}    # JSON Schema of the parameters (default: the sampling settings)
//	  output-schema: {...}       # JSON Schema of the result (default: a string)
//	  required-tools: [a, b]     # tools or minions the agent cannot work without
//	  minions:                   # agents it hands work to
//	    - Researcher             # an agent of the same server
//	    - {name: Web, url: wss://host/agents/Web/run}
//	  max-tasks: 10              # plan: the budget of tasks
//
// Keys may be written with - or _.
type AgentDesc struct {
	// Type is one of AgentTypes; "" when the block does not say.
	Type string
	// The schemas are nil when the block does not give them.
	InputSchema, ContextSchema, ParameterSchema, OutputSchema map[string]any
	RequiredTools                                             []string
	Minions                                                   []MinionDesc
	// MaxTasks is a planner's budget; 0 when not set.
	MaxTasks int
}

// MinionDesc is one minion of an agent block: an agent of the same
// server (Name only) or a remote one (URL).
type MinionDesc struct {
	Name string
	URL  string
	// Line is where the minion is given, for messages.
	Line int
}

// agentKeys are the keys of the agent block.
var agentKeys = []string{"type", "input-schema", "context-schema", "parameter-schema", "output-schema", "required-tools", "minions", "max-tasks"}

// AgentDesc reads the agent block. A cartridge without one has a zero
// AgentDesc. Any problem is an *Error naming the file, the line and the
// key, and what to write instead.
func (c *Cartridge) AgentDesc() (AgentDesc, error) {
	var d AgentDesc
	v, ok := c.Get("agent")
	if !ok || v == nil {
		return d, nil
	}
	fail := func(path, format string, args ...any) error {
		return &Error{File: c.Path, Line: c.lineOf(path), Key: path, Msg: fmt.Sprintf(format, args...)}
	}
	block, isMap := v.(map[string]any)
	if !isMap {
		return d, fail("agent", "must be a mapping (type, input-schema, context-schema, parameter-schema, output-schema, required-tools, minions, max-tasks), not %s", kind(v))
	}
	keys := make([]string, 0, len(block))
	for k := range block {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		val := block[k]
		path := "agent." + k
		switch strings.ReplaceAll(k, "_", "-") {
		case "type":
			s, _ := val.(string)
			if !contains(AgentTypes, s) {
				return d, fail(path, "must be one of %s, not %v", strings.Join(AgentTypes, ", "), val)
			}
			d.Type = s
		case "input-schema":
			s, err := agentSchema(val)
			if err != nil {
				return d, fail(path, "%v", err)
			}
			d.InputSchema = s
		case "context-schema":
			s, err := agentSchema(val)
			if err != nil {
				return d, fail(path, "%v", err)
			}
			d.ContextSchema = s
		case "parameter-schema":
			s, err := agentSchema(val)
			if err != nil {
				return d, fail(path, "%v", err)
			}
			if s != nil && s["type"] != "object" {
				return d, fail(path, "must be a JSON Schema of type object (parameters are named), not %v", s["type"])
			}
			d.ParameterSchema = s
		case "output-schema":
			s, err := agentSchema(val)
			if err != nil {
				return d, fail(path, "%v", err)
			}
			d.OutputSchema = s
		case "required-tools":
			list, isList := val.([]any)
			if !isList && val != nil {
				return d, fail(path, "must be a list of tool or minion names, not %s", kind(val))
			}
			for i, x := range list {
				s, isText := x.(string)
				if !isText || strings.TrimSpace(s) == "" {
					return d, fail(fmt.Sprintf("%s[%d]", path, i), "must be a tool or minion name, not %s", kind(x))
				}
				d.RequiredTools = append(d.RequiredTools, s)
			}
		case "minions":
			list, isList := val.([]any)
			if !isList && val != nil {
				return d, fail(path, "must be a list of agent names or {name, url} mappings, not %s", kind(val))
			}
			for i, x := range list {
				ipath := fmt.Sprintf("%s[%d]", path, i)
				m := MinionDesc{Line: c.lineOf(ipath)}
				switch t := x.(type) {
				case string:
					m.Name = t
				case map[string]any:
					for mk := range t {
						if mk != "name" && mk != "url" {
							return d, fail(ipath+"."+mk, "unknown key%s; a minion has a name and, when it is remote, a url", nearest(mk, []string{"name", "url"}))
						}
					}
					m.Name, _ = t["name"].(string)
					m.URL, _ = t["url"].(string)
					if m.URL != "" {
						u, err := url.Parse(m.URL)
						if err != nil || (u.Scheme != "ws" && u.Scheme != "wss") || u.Host == "" || !strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), "/run") {
							return d, fail(ipath+".url", "must be the run address of a remote agent, ws://host/agents/NAME/run or wss://…, not %q", m.URL)
						}
					}
				default:
					return d, fail(ipath, "must be an agent name or a {name, url} mapping, not %s", kind(x))
				}
				if strings.TrimSpace(m.Name) == "" {
					return d, fail(ipath, "a minion needs a name")
				}
				d.Minions = append(d.Minions, m)
			}
		case "max-tasks":
			n, isInt := val.(int64)
			if !isInt || n <= 0 {
				return d, fail(path, "must be a whole number above 0, not %v", val)
			}
			d.MaxTasks = int(n)
		default:
			return d, fail(path, "unknown key%s; the agent block takes %s", nearest(k, agentKeys), strings.Join(agentKeys, ", "))
		}
	}
	return d, nil
}

// agentSchema checks that v is a JSON Schema (a mapping the validator
// can use) and returns it with JSON's types (float64 numbers).
func agentSchema(v any) (map[string]any, error) {
	if v == nil {
		return nil, nil
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("must be a JSON Schema written as a mapping, not %s", kind(v))
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("is not a JSON Schema: %v", err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("is not a JSON Schema: %v", err)
	}
	if _, err := s.Resolve(nil); err != nil {
		return nil, fmt.Errorf("is not a usable JSON Schema: %v", err)
	}
	var out map[string]any
	json.Unmarshal(data, &out) //nolint:errcheck // just encoded
	return out, nil
}
