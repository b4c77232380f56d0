package openai

import (
	"encoding/json"
	"fmt"
	"testing"

	sjson "github.com/segmentio/encoding/json"

	"github.com/nbots/nb/tool"
)

// TestToolsEncodedOnce: a spec whose schema map comes back at the next
// call costs no encoding and no map (a turn's request offers every tool
// of the bot), and the bytes sent are those of the map form, encoded as
// provider.Send encodes (keys sorted, HTML escaped) and as encoding/json
// writes them.
func TestToolsEncodedOnce(t *testing.T) {
	var specs []tool.Spec
	for i := range 10 {
		specs = append(specs, tool.Spec{Name: fmt.Sprintf("t%d", i), Description: "<b>&",
			Parameters: map[string]any{"type": "object", "properties": map[string]any{"z": map[string]any{"type": "string"}, "a": map[string]any{"type": "integer", "minimum": 1.5}}}})
	}
	specs = append(specs, tool.Spec{Name: "nodesc", Parameters: tool.DefaultParameters()})
	got, err := sjson.Marshal(map[string]any{"tools": Tools(specs)})
	if err != nil {
		t.Fatal(err)
	}
	maps := make([]any, len(specs))
	for i, s := range specs {
		maps[i] = toolMap(s)
	}
	want, err := json.Marshal(map[string]any{"tools": maps})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("tools sent as\n%s\nwant\n%s", got, want)
	}
	if n := testing.AllocsPerRun(100, func() { Tools(specs) }); n > 1 {
		t.Errorf("Tools of %d specs seen before: %.0f allocations, want 1 (the list)", len(specs), n)
	}
}

// TestToolsNewSchema: a tool whose schema changes returns a new map,
// and the new schema is what is sent; so is a new name or description
// with the same map.
func TestToolsNewSchema(t *testing.T) {
	params := map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"type": "string"}}}
	sent := func(s tool.Spec) string {
		b, err := sjson.Marshal(Tools([]tool.Spec{s}))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	first := sent(tool.Spec{Name: "f", Description: "d", Parameters: params})
	for _, s := range []tool.Spec{
		{Name: "f", Description: "d", Parameters: map[string]any{"type": "object", "properties": map[string]any{"b": map[string]any{"type": "string"}}}},
		{Name: "g", Description: "d", Parameters: params},
		{Name: "f", Description: "e", Parameters: params},
	} {
		b, _ := json.Marshal([]any{toolMap(s)})
		if got := sent(s); got != string(b) || got == first {
			t.Errorf("%+v sent as %s, want %s", s, got, b)
		}
	}
}
