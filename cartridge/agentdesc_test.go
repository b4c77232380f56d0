package cartridge

import (
	"strings"
	"testing"
)

func TestAgentDesc(t *testing.T) {
	src := `meta: {name: Writer}
agent:
  type: plan
  input_schema: {type: object, properties: {task: {type: string}}, required: [task]}
  output-schema: {type: object, properties: {n: {type: integer}}}
  parameter-schema: {type: object, properties: {temperature: {type: number}}}
  required-tools: [ReadFile]
  minions:
    - Researcher
    - {name: Web, url: "wss://example.com/agents/Web/run"}
  max-tasks: 4
`
	c, err := Parse([]byte(src), "w.yml", FormatYAML, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("warnings: %v", c.Warnings)
	}
	d, err := c.AgentDesc()
	if err != nil {
		t.Fatal(err)
	}
	if d.Type != "plan" || d.InputSchema["type"] != "object" || d.OutputSchema == nil || d.ParameterSchema == nil ||
		len(d.RequiredTools) != 1 || len(d.Minions) != 2 || d.Minions[1].URL == "" || d.Minions[0].Name != "Researcher" || d.MaxTasks != 4 {
		t.Errorf("desc = %+v", d)
	}
	if d.Minions[1].Line != 10 {
		t.Errorf("minion line = %d, want 10", d.Minions[1].Line)
	}
}

func TestAgentDescErrors(t *testing.T) {
	cases := []struct{ block, want string }{
		{"agent: [a]", "a.yml:2: agent: must be a mapping"},
		{"agent:\n  type: babyagi", "a.yml:3: agent.type: must be one of functions, react, plan, not babyagi"},
		{"agent:\n  input-schema: text", "a.yml:3: agent.input-schema: must be a JSON Schema written as a mapping, not text"},
		{"agent:\n  output-schema: {type: 3}", "a.yml:3: agent.output-schema: is not a JSON Schema"},
		{"agent:\n  parameter-schema: {type: string}", "a.yml:3: agent.parameter-schema: must be a JSON Schema of type object"},
		{"agent:\n  required-tools: [a, {b: 1}]", "a.yml:3: agent.required-tools[1]: must be a tool or minion name, not a mapping"},
		{"agent:\n  minions:\n    - {name: X, url: http://h/x}", "a.yml:4: agent.minions[0].url: must be the run address of a remote agent"},
		{"agent:\n  minions:\n    - {url: ws://h/agents/X/run}", "a.yml:4: agent.minions[0]: a minion needs a name"},
		{"agent:\n  minions:\n    - {name: X, token: t}", "agent.minions[0].token: unknown key"},
		{"agent:\n  max-tasks: 0", "a.yml:3: agent.max-tasks: must be a whole number above 0, not 0"},
		{"agent:\n  tools: [x]", "a.yml:3: agent.tools: unknown key; the agent block takes type, input-schema"},
	}
	for _, tc := range cases {
		c, err := Parse([]byte("meta: {name: A}\n"+tc.block+"\n"), "a.yml", FormatYAML, nil)
		if err != nil {
			t.Fatalf("%q: %v", tc.block, err)
		}
		_, err = c.AgentDesc()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err = %v, want %q", tc.block, err, tc.want)
		}
	}
}
