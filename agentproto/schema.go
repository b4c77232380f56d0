package agentproto

import (
	"embed"
	"encoding/json"
	"fmt"
	"net/url"
	"path"
	"regexp"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
)

// SchemaBase is the URI the protocol's schemas are identified under
// ($id); their references are relative to it.
const SchemaBase = "https://schemas.nbots.invalid/agent-protocol/1/"

//go:embed schema/*.json
var schemaFiles embed.FS

// SchemaFiles lists the protocol's schema files (schema/<name>.json): one
// per frame type, defs.json, agents.json and tools.json.
func SchemaFiles() []string {
	entries, _ := schemaFiles.ReadDir("schema")
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, "schema/"+e.Name())
	}
	return out
}

// SchemaText returns the text of a schema file (see SchemaFiles).
func SchemaText(name string) ([]byte, error) {
	return schemaFiles.ReadFile(name)
}

var (
	schemasOnce sync.Once
	schemas     map[string]*jsonschema.Resolved
	schemasErr  error
)

// loadSchemas resolves every schema file once.
func loadSchemas() (map[string]*jsonschema.Resolved, error) {
	schemasOnce.Do(func() {
		raw := map[string]*jsonschema.Schema{}
		for _, name := range SchemaFiles() {
			data, _ := schemaFiles.ReadFile(name)
			var s jsonschema.Schema
			if err := json.Unmarshal(data, &s); err != nil {
				schemasErr = fmt.Errorf("agentproto: %s: %w", name, err)
				return
			}
			raw[SchemaBase+path.Base(name)] = &s
		}
		loader := func(u *url.URL) (*jsonschema.Schema, error) {
			s, ok := raw[u.String()]
			if !ok {
				return nil, fmt.Errorf("no schema %s", u)
			}
			return s, nil
		}
		schemas = map[string]*jsonschema.Resolved{}
		for id, s := range raw {
			r, err := s.Resolve(&jsonschema.ResolveOptions{BaseURI: id, Loader: loader})
			if err != nil {
				schemasErr = fmt.Errorf("agentproto: %s: %w", id, err)
				return
			}
			schemas[strings.TrimSuffix(strings.TrimPrefix(id, SchemaBase), ".json")] = r
		}
	})
	return schemas, schemasErr
}

// Validate checks a JSON value (as encoding/json decodes into any)
// against one of the protocol's schemas by name: a frame type, "agents"
// or "tools".
func Validate(name string, v any) error {
	all, err := loadSchemas()
	if err != nil {
		return err
	}
	s, ok := all[name]
	if !ok || name == "defs" {
		return fmt.Errorf("unknown frame type %q", name)
	}
	if err := s.Validate(v); err != nil {
		return SchemaError(err)
	}
	return nil
}

// ValidateFrame checks the JSON text of a frame against the schema of
// its type.
func ValidateFrame(data []byte) error {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("a frame is a JSON object")
	}
	t, _ := m["type"].(string)
	if t == "" {
		return fmt.Errorf("a frame needs a type")
	}
	return Validate(t, v)
}

var (
	schemaURI = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\S+\.json: `) })
	schemaDef = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`/\$defs/\w+: `) })
)

// schemaPath matches the validator's location of a property.
var schemaPath = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`/properties/([^/:]+)`) })

// SchemaError rewrites a validator's error for people: "validating root:
// validating /properties/a: type: ..." becomes "a: type: ...".
func SchemaError(err error) error {
	msg := err.Error()
	msg = schemaURI().ReplaceAllString(msg, "")
	msg = schemaDef().ReplaceAllString(msg, "")
	msg = strings.ReplaceAll(msg, "/items", "[]")
	msg = strings.ReplaceAll(msg, "validating root: ", "")
	msg = strings.ReplaceAll(msg, "validating ", "")
	msg = schemaPath().ReplaceAllString(msg, ".$1")
	msg = strings.TrimPrefix(msg, ".")
	msg = schemaType().ReplaceAllStringFunc(msg, func(m string) string {
		g := schemaType().FindStringSubmatch(m)
		return "must be " + kindOf(g[3]) + ", not " + kindOf(g[2])
	})
	msg = schemaTypes().ReplaceAllStringFunc(msg, func(m string) string {
		g := schemaTypes().FindStringSubmatch(m)
		var want []string
		for _, w := range strings.Split(g[3], ", ") {
			want = append(want, kindOf(w))
		}
		return "must be " + strings.Join(want, " or ") + ", not " + kindOf(g[2])
	})
	msg = schemaEnum().ReplaceAllString(msg, "must be one of $2")
	msg = schemaConst().ReplaceAllString(msg, "must be $2")
	return fmt.Errorf("%s", msg)
}

// The messages of the validator that print the value as Go prints it
// (map[x:1]): rewritten in JSON's words.
var (
	schemaType  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`type: (.*?) has type "(\w+)", want "(\w+)"`) })
	schemaTypes = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`type: (.*?) has type "(\w+)", want one of "([^"]*)"`)
	})
	schemaEnum  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`enum: (.*?) does not equal any of: (\[.*\])`) })
	schemaConst = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`const: (.*?) does not equal (.*)`) })
)

// kindOf names a JSON Schema type with its article: "an object".
func kindOf(t string) string {
	switch t {
	case "object", "array", "integer":
		return "an " + t
	case "null":
		return "null"
	}
	return "a " + t
}

// CompileSchema resolves a JSON Schema given as a decoded JSON value (an
// agent's input, context, parameter or output schema). nil means any
// value.
func CompileSchema(s map[string]any) (*jsonschema.Resolved, error) {
	if s == nil {
		return nil, nil
	}
	data, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	var sch jsonschema.Schema
	if err := json.Unmarshal(data, &sch); err != nil {
		return nil, fmt.Errorf("not a JSON Schema: %w", err)
	}
	r, err := sch.Resolve(nil)
	if err != nil {
		return nil, fmt.Errorf("not a usable JSON Schema: %w", err)
	}
	return r, nil
}

// Plain re-reads a Go value as encoding/json would decode its JSON (maps
// of any, float64 numbers), the form schemas validate.
func Plain(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if json.Unmarshal(data, &out) != nil {
		return v
	}
	return out
}
