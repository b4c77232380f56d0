package mcp

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestSchema(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"nil", `null`, `{"type":"object","properties":{}}`},
		{"empty", `{}`, `{"type":"object","properties":{}}`},
		{"dialect keywords go",
			`{"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"x","$comment":"c","type":"object","properties":{"a":{"type":"string"}},"required":["a","ghost"]}`,
			`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`},
		{"refs are inlined",
			`{"type":"object","properties":{"when":{"$ref":"#/$defs/Date","description":"the day"},"old":{"$ref":"#/definitions/Old"}},"$defs":{"Date":{"type":"string","format":"date-time","description":"a date"}},"definitions":{"Old":{"type":"integer"}}}`,
			`{"type":"object","properties":{"when":{"type":"string","format":"date-time","description":"the day"},"old":{"type":"integer"}}}`},
		{"recursive refs are cut",
			`{"type":"object","properties":{"tree":{"$ref":"#/$defs/Node"}},"$defs":{"Node":{"type":"object","description":"a node","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/Node"}}}}}}`,
			`{"type":"object","properties":{"tree":{"type":"object","description":"a node","properties":{"kids":{"type":"array","items":{"type":"object","description":"a node (a Node, as described above)","properties":{}}}}}}}`},
		{"unknown refs are dropped",
			`{"type":"object","properties":{"x":{"$ref":"https://example.com/s.json","description":"remote"}}}`,
			`{"type":"object","properties":{"x":{"description":"remote"}}}`},
		{"formats Gemini refuses go to the description",
			`{"type":"object","properties":{"u":{"type":"string","format":"uri"},"d":{"type":"string","format":"date-time"},"n":{"type":"integer","format":"int64"},"e":{"type":"string","format":"email","description":"mail"}}}`,
			`{"type":"object","properties":{"u":{"type":"string","description":"format: uri"},"d":{"type":"string","format":"date-time"},"n":{"type":"integer","format":"int64"},"e":{"type":"string","description":"mail (format: email)"}}}`},
		{"non-string enums go to the description",
			`{"type":"object","properties":{"level":{"type":"integer","enum":[1,2,3]},"mode":{"enum":["fast","slow"]},"opt":{"type":["string","null"],"enum":["a",null]}}}`,
			`{"type":"object","properties":{"level":{"type":"integer","description":"one of: 1, 2, 3"},"mode":{"type":"string","enum":["fast","slow"]},"opt":{"type":["string","null"],"enum":["a"]}}}`},
		{"types are inferred",
			`{"properties":{"o":{"properties":{"a":{"type":"string"}}},"l":{"items":{"type":"number"}},"c":{"const":"x"},"free":{}}}`,
			`{"type":"object","properties":{"o":{"type":"object","properties":{"a":{"type":"string"}}},"l":{"type":"array","items":{"type":"number"}},"c":{"type":"string","const":"x"},"free":{}}}`},
		{"objects get properties",
			`{"type":"object","properties":{"meta":{"type":"object","additionalProperties":{"type":"string"}}}}`,
			`{"type":"object","properties":{"meta":{"type":"object","properties":{},"additionalProperties":{"type":"string"}}}}`},
		{"allOf is merged",
			`{"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},{"properties":{"b":{"type":"number"}},"required":["b"]}]}`,
			`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"number"}},"required":["a","b"]}`},
		{"a root anyOf becomes the union",
			`{"anyOf":[{"type":"object","properties":{"id":{"type":"string"},"name":{"type":"string"}},"required":["id","name"]},{"type":"object","properties":{"id":{"type":"string"},"path":{"type":"string"}},"required":["id"]}]}`,
			`{"type":"object","properties":{"id":{"type":"string"},"name":{"type":"string"},"path":{"type":"string"}},"required":["id"]}`},
		{"a root oneOf of refs",
			`{"oneOf":[{"$ref":"#/$defs/A"},{"$ref":"#/$defs/B"}],"$defs":{"A":{"type":"object","properties":{"a":{"type":"string"}}},"B":{"type":"object","properties":{"b":{"type":"string"}}}}}`,
			`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}}}`},
		{"nested anyOf stays",
			`{"type":"object","properties":{"v":{"anyOf":[{"type":"string"},{"$ref":"#/$defs/N"}]}},"$defs":{"N":{"type":"number"}}}`,
			`{"type":"object","properties":{"v":{"anyOf":[{"type":"string"},{"type":"number"}]}}}`},
		{"boolean subschemas",
			`{"type":"object","properties":{"any":true},"additionalProperties":false}`,
			`{"type":"object","properties":{"any":{}},"additionalProperties":false}`},
		{"a non-object root", `{"type":"string"}`, `{"type":"object","properties":{}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var in, want any
			if err := json.Unmarshal([]byte(tt.in), &in); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tt.want), &want); err != nil {
				t.Fatal(err)
			}
			got := Schema(in)
			// Through JSON, as a provider sends it.
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			var gotJSON any
			json.Unmarshal(b, &gotJSON)
			if diff := cmp.Diff(want, gotJSON); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A schema given as a Go value (the SDK's jsonschema.Schema) goes
// through JSON first.
func TestSchemaFromStruct(t *testing.T) {
	type prop struct {
		Type string `json:"type"`
	}
	in := struct {
		Schema     string          `json:"$schema"`
		Type       string          `json:"type"`
		Properties map[string]prop `json:"properties"`
	}{"x", "object", map[string]prop{"a": {"string"}}}
	got := Schema(in)
	want := map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func FuzzSchema(f *testing.F) {
	f.Add(`{"type":"object","properties":{"a":{"$ref":"#"}}}`)
	f.Add(`{"anyOf":[{"$ref":"#/$defs/a"}],"$defs":{"a":{"allOf":[{"$ref":"#/$defs/a"}]}}}`)
	f.Add(`{"properties":{"a":{"enum":[1,"x",null],"format":"uri"}}}`)
	f.Fuzz(func(t *testing.T, s string) {
		var in any
		if json.Unmarshal([]byte(s), &in) != nil {
			return
		}
		out := Schema(in)
		if out["type"] != "object" {
			t.Fatalf("root type %v", out["type"])
		}
		if _, err := json.Marshal(out); err != nil {
			t.Fatal(err)
		}
	})
}

// Definitions that refer to each other several times are not expanded
// exponentially.
func TestSchemaExpansionBound(t *testing.T) {
	defs := map[string]any{}
	for i := range 20 {
		props := map[string]any{}
		for j := range 20 {
			props[fmt.Sprintf("p%d", j)] = map[string]any{"$ref": fmt.Sprintf("#/$defs/d%d", j)}
		}
		defs[fmt.Sprintf("d%d", i)] = map[string]any{"type": "object", "properties": props}
	}
	in := map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"$ref": "#/$defs/d0"}}, "$defs": defs}
	done := make(chan map[string]any)
	go func() { done <- Schema(in) }()
	select {
	case out := <-done:
		b, _ := json.Marshal(out)
		if len(b) > 1<<20 {
			t.Errorf("the schema grew to %d bytes", len(b))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Schema did not finish")
	}
}
