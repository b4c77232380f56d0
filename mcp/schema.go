package mcp

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Schema turns an MCP tool's input schema (any JSON Schema dialect) into
// one that every provider nb talks to accepts, keeping its meaning where
// the providers allow:
//
//   - The root is an object with properties: OpenAI and Anthropic refuse
//     any other root, and refuse anyOf, oneOf and allOf at the root. A
//     root allOf is merged; a root anyOf or oneOf becomes the union of
//     its alternatives' properties, required only where every
//     alternative requires it.
//   - Local references ($ref to #/$defs/..., #/definitions/... or #) are
//     inlined: Gemini knows no $ref. A recursive reference is cut after
//     its first expansion into {type: object} with the definition's
//     description. Other references are dropped.
//   - $schema, $id, $comment, $anchor and the definitions themselves are
//     removed; allOf anywhere is merged into its parent.
//   - Gemini accepts only the string formats enum and date-time and the
//     number formats float, double, int32 and int64; other formats (uri,
//     email...) move into the description, where the model still reads
//     them. Likewise an enum on a non-string type (Gemini takes only
//     string enums) moves into the description.
//   - A schema without a type gets the one its keywords imply (object for
//     properties, array for items, string for a string enum), since
//     Gemini requires a type; an object gets properties: {}; required
//     names only properties that exist.
//
// OpenAI's strict mode (every property required, additionalProperties
// false) would change what a tool accepts and is not applied: nb sends
// tools without strict. Keywords a provider does not know are left for
// its own request builder to drop (the Gemini provider keeps only its
// OpenAPI subset).
func Schema(in any) map[string]any {
	root, ok := plainJSON(in).(map[string]any)
	if !ok {
		return map[string]any{"type": "object", "properties": map[string]any{}}
	}
	n := &normalizer{root: root, budget: refBudget}
	out := n.walk(root, nil)
	return rootObject(out)
}

type normalizer struct {
	root map[string]any
	// budget bounds the references expanded: definitions that refer to
	// each other several times would otherwise grow exponentially.
	budget int
}

// refBudget is how many references one schema may expand; past it,
// references are cut as recursive ones are.
const refBudget = 200

// plainJSON gives any value the shape encoding/json decodes into.
func plainJSON(v any) any {
	if v == nil {
		return nil
	}
	if m, ok := v.(map[string]any); ok && isPlain(m) {
		return m
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	if json.Unmarshal(b, &out) != nil {
		return nil
	}
	return out
}

// isPlain is a cheap check that a map came from encoding/json (only
// top-level types are looked at; walk copies everything anyway).
func isPlain(m map[string]any) bool {
	for _, v := range m {
		switch v.(type) {
		case nil, bool, float64, string, []any, map[string]any:
		default:
			return false
		}
	}
	return true
}

var dropKeys = map[string]bool{
	"$schema": true, "$id": true, "$comment": true, "$anchor": true, "$dynamicAnchor": true,
	"$dynamicRef": true, "$defs": true, "definitions": true, "$vocabulary": true,
}

// geminiFormats are the formats Gemini accepts, by type.
var geminiFormats = map[string][]string{
	"string":  {"enum", "date-time"},
	"number":  {"float", "double"},
	"integer": {"int32", "int64"},
}

// walk returns a normalised copy of s; refs are the references being
// expanded above it (to cut recursion).
func (n *normalizer) walk(s map[string]any, refs []string) map[string]any {
	if ref, ok := s["$ref"].(string); ok {
		target, name := n.resolve(ref)
		siblings := map[string]any{}
		for k, v := range s {
			if k != "$ref" {
				siblings[k] = v
			}
		}
		if target == nil {
			return n.walk(siblings, refs)
		}
		if slices.Contains(refs, ref) || n.budget <= 0 {
			cut := map[string]any{"type": "object"}
			if t, ok := target["type"].(string); ok {
				cut["type"] = t
			}
			desc := fmt.Sprintf("(a %s, as described above)", name)
			if d, ok := target["description"].(string); ok && d != "" {
				desc = d + " " + desc
			}
			cut["description"] = desc
			return n.walk(mergeInto(cut, siblings), refs)
		}
		n.budget--
		merged := mergeInto(copyMap(target), siblings)
		return n.walk(merged, append(refs, ref))
	}

	out := map[string]any{}
	for k, v := range s {
		if dropKeys[k] {
			continue
		}
		switch k {
		case "properties", "patternProperties", "dependentSchemas":
			if props, ok := v.(map[string]any); ok {
				p := make(map[string]any, len(props))
				for name, sub := range props {
					p[name] = n.sub(sub, refs)
				}
				out[k] = p
			}
		case "items", "additionalProperties", "not", "contains", "propertyNames", "if", "then", "else", "unevaluatedProperties", "additionalItems":
			switch sub := v.(type) {
			case map[string]any:
				out[k] = n.walk(sub, refs)
			case []any: // draft-04 tuple items
				list := make([]any, len(sub))
				for i, x := range sub {
					list[i] = n.sub(x, refs)
				}
				out[k] = list
			default:
				out[k] = v
			}
		case "anyOf", "oneOf", "prefixItems":
			if list, ok := v.([]any); ok {
				subs := make([]any, len(list))
				for i, x := range list {
					subs[i] = n.sub(x, refs)
				}
				out[k] = subs
			}
		case "allOf":
			// merged below
		default:
			out[k] = v
		}
	}
	if list, ok := s["allOf"].([]any); ok {
		for _, x := range list {
			if m, ok := n.sub(x, refs).(map[string]any); ok {
				out = mergeSchemas(out, m)
			}
		}
	}
	fixType(out)
	fixFormat(out)
	fixEnum(out)
	if out["type"] == "object" {
		if _, ok := out["properties"]; !ok {
			out["properties"] = map[string]any{}
		}
	}
	pruneRequired(out)
	return out
}

// sub normalises a subschema, which may be a boolean schema.
func (n *normalizer) sub(v any, refs []string) any {
	switch t := v.(type) {
	case map[string]any:
		return n.walk(t, refs)
	case bool:
		if t {
			return map[string]any{}
		}
		return map[string]any{"not": map[string]any{}}
	}
	return v
}

// resolve finds a local reference's target and a name for it.
func (n *normalizer) resolve(ref string) (map[string]any, string) {
	if ref == "#" || ref == "#/" {
		return n.root, "value"
	}
	ptr, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, ""
	}
	var cur any = n.root
	parts := strings.Split(ptr, "/")
	for _, p := range parts {
		p = strings.ReplaceAll(strings.ReplaceAll(p, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, ""
		}
		if cur, ok = m[p]; !ok {
			return nil, ""
		}
	}
	m, _ := cur.(map[string]any)
	return m, parts[len(parts)-1]
}

func fixType(s map[string]any) {
	if _, ok := s["type"]; ok {
		return
	}
	switch {
	case s["properties"] != nil:
		s["type"] = "object"
	case s["items"] != nil || s["prefixItems"] != nil:
		s["type"] = "array"
	case s["enum"] != nil:
		if list, ok := s["enum"].([]any); ok && len(list) > 0 {
			allText := true
			for _, e := range list {
				if _, isText := e.(string); !isText && e != nil {
					allText = false
				}
			}
			if allText {
				s["type"] = "string"
			}
		}
	case s["const"] != nil:
		switch s["const"].(type) {
		case string:
			s["type"] = "string"
		case bool:
			s["type"] = "boolean"
		case float64:
			s["type"] = "number"
		}
	}
}

func fixFormat(s map[string]any) {
	f, ok := s["format"].(string)
	if !ok {
		return
	}
	t, _ := s["type"].(string)
	if slices.Contains(geminiFormats[t], f) {
		return
	}
	delete(s, "format")
	addDescription(s, "format: "+f)
}

func fixEnum(s map[string]any) {
	list, ok := s["enum"].([]any)
	if !ok {
		return
	}
	if hasType(s, "string") {
		kept := make([]any, 0, len(list))
		for _, e := range list {
			if _, isText := e.(string); isText {
				kept = append(kept, e)
			}
		}
		s["enum"] = kept
		return
	}
	words := make([]string, len(list))
	for i, e := range list {
		b, _ := json.Marshal(e)
		words[i] = string(b)
	}
	delete(s, "enum")
	addDescription(s, "one of: "+strings.Join(words, ", "))
}

// hasType reports whether s's type is t or a list that has t.
func hasType(s map[string]any, t string) bool {
	switch v := s["type"].(type) {
	case string:
		return v == t
	case []any:
		return slices.Contains(v, any(t))
	}
	return false
}

func addDescription(s map[string]any, note string) {
	if d, ok := s["description"].(string); ok && d != "" {
		s["description"] = d + " (" + note + ")"
		return
	}
	s["description"] = note
}

// pruneRequired keeps the required names that are properties.
func pruneRequired(s map[string]any) {
	req, ok := s["required"].([]any)
	if !ok {
		if _, exists := s["required"]; exists {
			delete(s, "required")
		}
		return
	}
	props, _ := s["properties"].(map[string]any)
	var kept []any
	seen := map[string]bool{}
	for _, r := range req {
		name, ok := r.(string)
		if !ok || seen[name] {
			continue
		}
		if _, exists := props[name]; exists {
			kept = append(kept, name)
			seen[name] = true
		}
	}
	if len(kept) == 0 {
		delete(s, "required")
		return
	}
	s["required"] = kept
}

// rootObject makes the root an object schema without anyOf, oneOf or
// allOf.
func rootObject(s map[string]any) map[string]any {
	for _, k := range []string{"anyOf", "oneOf"} {
		list, ok := s[k].([]any)
		if !ok {
			continue
		}
		delete(s, k)
		props, _ := s["properties"].(map[string]any)
		if props == nil {
			props = map[string]any{}
		}
		var common map[string]bool
		for _, x := range list {
			alt, ok := x.(map[string]any)
			if !ok {
				continue
			}
			if ap, ok := alt["properties"].(map[string]any); ok {
				for name, p := range ap {
					if _, taken := props[name]; !taken {
						props[name] = p
					}
				}
			}
			req := map[string]bool{}
			if r, ok := alt["required"].([]any); ok {
				for _, name := range r {
					if n, ok := name.(string); ok {
						req[n] = true
					}
				}
			}
			if common == nil {
				common = req
			} else {
				for n := range common {
					if !req[n] {
						delete(common, n)
					}
				}
			}
		}
		s["properties"] = props
		if len(common) > 0 {
			names := make([]string, 0, len(common))
			for n := range common {
				names = append(names, n)
			}
			sort.Strings(names)
			req, _ := s["required"].([]any)
			for _, n := range names {
				if !slices.Contains(req, any(n)) {
					req = append(req, n)
				}
			}
			s["required"] = req
		}
	}
	if t, ok := s["type"].(string); !ok || t != "object" {
		s["type"] = "object"
	}
	if _, ok := s["properties"].(map[string]any); !ok {
		s["properties"] = map[string]any{}
	}
	delete(s, "enum")
	delete(s, "not")
	pruneRequired(s)
	return s
}

// mergeSchemas merges b into a (allOf): properties and required are
// united, other keys keep a's value.
func mergeSchemas(a, b map[string]any) map[string]any {
	for k, v := range b {
		switch k {
		case "properties":
			pa, _ := a["properties"].(map[string]any)
			if pa == nil {
				pa = map[string]any{}
			}
			if pb, ok := v.(map[string]any); ok {
				for name, p := range pb {
					if _, taken := pa[name]; !taken {
						pa[name] = p
					}
				}
			}
			a["properties"] = pa
		case "required":
			ra, _ := a["required"].([]any)
			if rb, ok := v.([]any); ok {
				for _, r := range rb {
					if !slices.Contains(ra, r) {
						ra = append(ra, r)
					}
				}
			}
			a["required"] = ra
		default:
			if _, taken := a[k]; !taken {
				a[k] = v
			}
		}
	}
	return a
}

func mergeInto(dst, src map[string]any) map[string]any {
	for k, v := range src {
		dst[k] = v
	}
	return dst
}

func copyMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
