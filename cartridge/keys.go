package cartridge

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// keys describes what a cartridge key may hold: a mapping whose keys the
// specification fixes, a list of such things, or anything (open).
type keys struct {
	names  []string         // the known keys, in the specification's order
	fields map[string]*keys // what each known key holds; nil: a value
	items  *keys            // for a list: each element
	open   bool             // any key passes, unchecked
}

// anything is a value whose keys are not checked: provider settings go to
// the API as written, a JSON schema has its own vocabulary, and the nb
// extensions below check their own keys where they are read.
var anything = &keys{open: true}

// mapping builds a mapping's keys from name, holds pairs; holds is nil for
// a plain value.
func mapping(pairs ...any) *keys {
	k := &keys{fields: map[string]*keys{}}
	for i := 0; i < len(pairs); i += 2 {
		name := pairs[i].(string)
		k.names = append(k.names, name)
		if i+1 < len(pairs) {
			k.fields[name], _ = pairs[i+1].(*keys)
		}
	}
	return k
}

// values is a mapping of plain values.
func values(names ...string) *keys {
	k := &keys{fields: map[string]*keys{}, names: names}
	for _, n := range names {
		k.fields[n] = nil
	}
	return k
}

func listOf(k *keys) *keys { return &keys{items: k} }

// with returns a copy of k with more keys.
func (k *keys) with(pairs ...any) *keys {
	out := mapping()
	for _, n := range k.names {
		out.names = append(out.names, n)
		out.fields[n] = k.fields[n]
	}
	more := mapping(pairs...)
	for _, n := range more.names {
		out.names = append(out.names, n)
		out.fields[n] = more.fields[n]
	}
	return out
}

// knownKeys is every key of a cartridge that the specification
// (/work/shared/spec/nano-bots-spec.md, "Full Specification") or a
// documented nb extension fixes. An extension adds its keys here.
var knownKeys = func() *keys {
	adapter := values(Languages...)
	affixes := func(extra ...string) *keys {
		return values(append([]string{"prefix", "suffix", "color"}, extra...)...).with("adapter", adapter)
	}
	action := affixes("feedback")
	feedback := affixes("feedback", "default").with(
		"confirming", action.with("yeses", nil, "default", nil),
		"executing", action,
		"responding", action,
	)
	scope := mapping("input", affixes(), "output", affixes("stream"), "tools", feedback)
	behavior := values("directive", "backdrop", "instruction")
	return mapping(
		"meta", values("symbol", "name", "author", "version", "license", "description"),
		"behaviors", mapping("interaction", behavior, "boot", behavior),
		"interfaces", scope.with(
			"repl", scope.with("prompt", listOf(values("text", "color"))),
			"eval", scope,
		),
		"provider", mapping("id", nil, "credentials", anything, "options", anything, "settings", anything, "timeouts", anything),
		"tools", listOf(values("name", "description", "lua", "fennel", "clojure", "robopage").with("parameters", anything)),
		"safety", mapping(
			"functions", mapping("sandboxed", nil, "limits", values("cpu-seconds", "memory", "timeout")),
			"tools", values("confirmable", "rounds"),
			// nb extensions: the exchange's token budget and the loop
			// detector's window (docs/loop.md).
			"tokens", nil,
			"loops", nil,
		),
		"state", values("path", "directory", "budget"),
		"miscellaneous", anything,
		// nb extensions: robopages as tools (docs/robopages.md), MCP
		// servers (checked by Cartridge.MCP), built-in tools (checked by
		// Cartridge.Builtins), and an agent's description.
		"robopages", listOf(values("path", "filter")),
		"mcp", anything,
		"builtins", anything,
		"agent", anything,
		// The project context (Cartridge.Context).
		"context", anything,
	)
}()

// TopLevelKeys lists the top-level keys a cartridge may have.
var TopLevelKeys = append([]string(nil), knownKeys.names...)

// unknownKeys warns once about every key that is not known where the
// keys are fixed, with the nearest known key as a suggestion.
func (c *Cartridge) unknownKeys() {
	root := knownKeys.with()
	for _, name := range TopLevelKeys { // keys declared by extensions
		if _, ok := root.fields[name]; !ok {
			root.names = append(root.names, name)
			root.fields[name] = anything
		}
	}
	c.checkKeys(c.Data, root, "")
	sort.SliceStable(c.Warnings, func(i, j int) bool { return warningLine(c.Warnings[i]) < warningLine(c.Warnings[j]) })
}

func (c *Cartridge) checkKeys(v any, k *keys, path string) {
	if k == nil || k.open {
		return
	}
	switch t := v.(type) {
	case map[string]any:
		if k.fields == nil {
			return
		}
		for _, name := range sortedKeys(t) {
			sub, known := k.fields[name]
			p := join(path, name)
			if !known {
				c.Warnings = append(c.Warnings, fmt.Sprintf("%s:%d: unknown key %q is ignored%s", displayName(c.Path), c.lineOf(p), p, suggestion(name, k.names)))
				continue
			}
			c.checkKeys(t[name], sub, p)
		}
	case []any:
		if k.items == nil {
			return
		}
		for i, item := range t {
			c.checkKeys(item, k.items, path+"["+strconv.Itoa(i)+"]")
		}
	}
}

// warningLine is the line a warning names, for sorting.
func warningLine(w string) int {
	_, rest, _ := strings.Cut(w, ":")
	n, _ := strconv.Atoi(strings.SplitN(rest, ":", 2)[0])
	return n
}

// Nearest returns the key of known nearest to name (a typo of it), or ""
// when none is near: other configuration readers (the gateway's) warn
// about unknown keys the way cartridges do.
func Nearest(name string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if d := distance(strings.ToLower(name), strings.ToLower(k)); d < bestDist && d < len(k) {
			best, bestDist = k, d
		}
	}
	return best
}

// nearestOrKnown is ": did you mean "sandbox"? (known: ...)", or
// " (known: ...)" when no known key is near name.
func nearestOrKnown(name string, known []string) string {
	return nearest(name, known) + " (known: " + strings.Join(known, ", ") + ")"
}

// nearest is ": did you mean "sandbox"?", or "" when no known key is
// near name.
func nearest(name string, known []string) string {
	if best := Nearest(name, known); best != "" {
		return fmt.Sprintf(": did you mean %q?", best)
	}
	return ""
}

// suggestion names the known key nearest to name, or lists them all.
func suggestion(name string, known []string) string {
	if s := nearest(name, known); s != "" {
		return s
	}
	seen := map[string]bool{}
	var list []string
	for _, k := range known {
		if !seen[k] {
			seen[k] = true
			list = append(list, k)
		}
	}
	return " (known keys here: " + strings.Join(list, ", ") + ")"
}

// distance is the Damerau-Levenshtein distance (optimal string alignment)
// between a and b, in bytes.
func distance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
