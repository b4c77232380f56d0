package engine

import (
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"sync"
)

// Context is the run's key-value store (§5.1), safe for concurrent use.
// Values are JSON values (string, float64, bool, nil, []any,
// map[string]any) or anything that marshals to JSON: a checkpoint keeps
// them, and a resumed run reads them back as JSON values.
type Context struct {
	mu     sync.RWMutex
	values map[string]any
	logs   []string
}

// NewContext returns an empty context.
func NewContext() *Context { return &Context{values: map[string]any{}} }

// Set sets key to v.
func (c *Context) Set(key string, v any) {
	c.mu.Lock()
	c.values[key] = v
	c.mu.Unlock()
}

// Get returns the value of key.
func (c *Context) Get(key string) (any, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	v, ok := c.values[key]
	return v, ok
}

// GetString returns the value of key as a string ("" when unset); see
// Stringify.
func (c *Context) GetString(key string) string {
	v, ok := c.Get(key)
	if !ok {
		return ""
	}
	return Stringify(v)
}

// Lookup is GetString with presence: the form conditions read.
func (c *Context) Lookup(key string) (string, bool) {
	v, ok := c.Get(key)
	if !ok {
		return "", false
	}
	return Stringify(v), true
}

// Stringify is how a context value reads as a string: strings as they
// are, whole numbers without a decimal point (3, not 3.0, even after a
// resume read them back as floats), booleans as true/false, other values
// as JSON.
func Stringify(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		return strconv.FormatBool(x)
	case int:
		return strconv.Itoa(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case fmt.Stringer:
		return x.String()
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(data)
}

// Keys returns the keys keep accepts, sorted.
func (c *Context) Keys(keep func(string) bool) []string {
	c.mu.RLock()
	keys := make([]string, 0, len(c.values))
	for k := range c.values {
		if keep(k) {
			keys = append(keys, k)
		}
	}
	c.mu.RUnlock()
	sort.Strings(keys)
	return keys
}

// AppendLog adds an entry to the run log.
func (c *Context) AppendLog(entry string) {
	c.mu.Lock()
	c.logs = append(c.logs, entry)
	c.mu.Unlock()
}

// Logs returns a copy of the run log.
func (c *Context) Logs() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return append([]string(nil), c.logs...)
}

// Snapshot returns a deep copy of the values, as JSON values.
func (c *Context) Snapshot() map[string]any {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return deepCopy(c.values)
}

// Clone returns an independent copy (a parallel branch's context).
func (c *Context) Clone() *Context {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return &Context{values: deepCopy(c.values), logs: append([]string(nil), c.logs...)}
}

// ApplyUpdates sets every key of updates.
func (c *Context) ApplyUpdates(updates map[string]any) {
	if len(updates) == 0 {
		return
	}
	c.mu.Lock()
	maps.Copy(c.values, updates)
	c.mu.Unlock()
}

// deepCopy copies m through JSON, so that a snapshot shares nothing with
// the live context and holds what a checkpoint will hold.
func deepCopy(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = copyValue(v)
	}
	return out
}

func copyValue(v any) any {
	switch x := v.(type) {
	case nil, string, bool, float64, int, int64:
		return x
	case map[string]any:
		return deepCopy(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = copyValue(e)
		}
		return out
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	var out any
	if json.Unmarshal(data, &out) != nil {
		return string(data)
	}
	return out
}
