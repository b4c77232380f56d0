package agentproto

import (
	"strings"
	"testing"
)

// The validator prints values as Go does (map[x:1]): SchemaError says it
// in JSON's words.
func TestSchemaErrorNoGoValues(t *testing.T) {
	cases := []struct {
		schema map[string]any
		value  any
		want   string
	}{
		{map[string]any{"type": "string"}, map[string]any{"x": 1.0}, `must be a string, not an object`},
		{map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}}, map[string]any{"n": []any{1.0}}, `n: must be an integer, not an array`},
		{map[string]any{"type": []any{"string", "null"}}, map[string]any{"x": 1.0}, `must be a string or null, not an object`},
		{map[string]any{"enum": []any{"red", "green"}}, map[string]any{"x": 1.0}, `must be one of [red green]`},
	}
	for _, c := range cases {
		r, err := CompileSchema(c.schema)
		if err != nil {
			t.Fatal(err)
		}
		err = r.Validate(c.value)
		if err == nil {
			t.Fatalf("%v validated against %v", c.value, c.schema)
		}
		got := SchemaError(err).Error()
		if got != c.want || strings.Contains(got, "map[") {
			t.Errorf("%v against %v: %q, want %q (the validator said %q)", c.value, c.schema, got, c.want, err)
		}
	}
}
