package openai

import (
	"reflect"
	"sync"

	sjson "github.com/segmentio/encoding/json"

	"github.com/nbots/nb/tool"
)

// toolCache keeps the encoded function tool of each spec whose schema
// map came back before: a tool returns the same, read-only, schema map
// at every call (tool.Spec), so a request costs the tools' encodings
// once, not at each call (they are most of a short request's bytes,
// maps whose keys the encoder sorts). The key is the map's identity
// with the name and description: a tool whose schema changes returns a
// new map, which misses. An entry holds its map, so that no other map
// is made at that address while the entry lives; the cache is emptied
// when it reaches maxToolCache entries, so that tools that build a new
// map at every call cost memory only up to that bound.
var toolCache struct {
	mu sync.Mutex
	m  map[toolKey]toolEntry
}

// maxToolCache bounds toolCache (a bot's tools and its sub-agents', MCP
// servers' included, are rarely more than a hundred).
const maxToolCache = 1024

type toolKey struct {
	params      uintptr
	name, descr string
}

type toolEntry struct {
	params map[string]any // holds the map at params alive
	fn     any            // the function tool, encoded (a json.RawMessage)
}

// encodedTool is spec's function tool as Tools sends it, encoded once
// per schema map (nil when it cannot be: no schema, or one that does not
// encode, which the request's encoding then reports).
func encodedTool(spec tool.Spec) any {
	if spec.Parameters == nil {
		return nil
	}
	key := toolKey{params: reflect.ValueOf(spec.Parameters).Pointer(), name: spec.Name, descr: spec.Description}
	toolCache.mu.Lock()
	e, ok := toolCache.m[key]
	toolCache.mu.Unlock()
	if ok {
		return e.fn
	}
	// The bytes the request's encoder would write for the map (keys
	// sorted, HTML escaped, as provider.Send encodes).
	b, err := sjson.Marshal(toolMap(spec))
	if err != nil {
		return nil
	}
	fn := any(sjson.RawMessage(b))
	toolCache.mu.Lock()
	if toolCache.m == nil || len(toolCache.m) >= maxToolCache {
		toolCache.m = make(map[toolKey]toolEntry)
	}
	toolCache.m[key] = toolEntry{params: spec.Parameters, fn: fn}
	toolCache.mu.Unlock()
	return fn
}

// toolMap is spec as a Chat Completions function tool.
func toolMap(t tool.Spec) map[string]any {
	fn := map[string]any{"name": t.Name, "parameters": t.Parameters}
	if t.Description != "" {
		fn["description"] = t.Description
	}
	return map[string]any{"type": "function", "function": fn}
}
