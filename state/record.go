package state

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"sync/atomic"
	"time"

	"github.com/nbots/nb/media"
)

// Role says who an event comes from.
type Role string

// The roles of a conversation, spelled as the reference's state files
// spell them.
const (
	RoleUser Role = "user"
	RoleAI   Role = "AI"
	RoleTool Role = "tool"
)

// ToolCall is one call of a tool the model asked for.
type ToolCall struct {
	ID, Name string
	// Arguments is the arguments' JSON text as the model sent them.
	Arguments string
}

// ToolResult says which call a tool event answers.
type ToolResult struct {
	// ID is the call's id and Name the tool's name, as the model sent them.
	ID, Name string
	// IsError marks a result that reports a failure.
	IsError bool
}

// Event is one entry of a conversation's history. Stores convert it to
// and from the reference's JSON record (see JSONEvent) at their edge.
type Event struct {
	At  string
	Who Role
	// Mode is "eval" or "repl".
	Mode string
	// Input is the user's raw input (user events).
	Input *string
	// Message is what was sent to or received from the model: text for
	// user and AI events (nil for a tool-call event), the tool's output
	// (any JSON value) for tool events.
	Message any
	// Output is what was displayed, affixes included (AI events).
	Output *string
	// Partial marks an answer cut short (a dropped stream, Ctrl-C): it is
	// kept for the record but never sent back as a complete answer.
	Partial bool
	// Images are the pictures of a user message or a tool result.
	Images []media.Image

	// ToolCalls are the calls of an AI event.
	ToolCalls []ToolCall
	// Reasoning is the model's reasoning text to send back (AI events).
	Reasoning string
	// Extra is provider data to send back verbatim (AI events).
	Extra map[string]any
	// Result is the call a tool event answers.
	Result ToolResult
	// Usage is what the exchange that ends with this answer cost, all its
	// rounds summed (AI events; nil when unknown).
	Usage *Usage

	// Meta holds the meta keys nb does not know (another implementation
	// wrote them); they are written back as they were read.
	Meta map[string]any

	// read is the known meta keys as they were read, so that an event
	// read and written unchanged is written byte for byte as it was.
	read *readMeta
}

// Now formats the current time for Event.At. The events of an exchange
// (the question, the answer, the tools' calls and results) are stamped
// within the same second, and the stamp has seconds only: the last one
// is kept and given again while the second (and the zone) is the same,
// instead of being formatted anew.
func Now() string {
	t := time.Now()
	sec, loc := t.Unix(), t.Location()
	if c := lastStamp.Load(); c != nil && c.sec == sec && c.loc == loc {
		return c.text
	}
	text := t.Format(time.RFC3339)
	lastStamp.Store(&stamp{sec: sec, loc: loc, text: text})
	return text
}

// stamp is a second Now formatted, in the zone it was formatted in.
type stamp struct {
	sec  int64
	loc  *time.Location
	text string
}

var lastStamp atomic.Pointer[stamp]

// JSONEvent is an event as the reference's state files hold it (at, who,
// mode, input, message, output, meta). Tool calls, reasoning, provider
// data and the answered call are meta keys there.
type JSONEvent struct {
	At      string         `json:"at"`
	Who     string         `json:"who"`
	Mode    string         `json:"mode,omitempty"`
	Input   *string        `json:"input,omitempty"`
	Message any            `json:"message"`
	Output  *string        `json:"output,omitempty"`
	Meta    map[string]any `json:"meta,omitempty"`
	Partial bool           `json:"partial,omitempty"`
	Images  []media.Image  `json:"images,omitempty"`
}

// The meta keys of the typed fields.
const (
	metaToolCalls = "tool_calls"
	metaReasoning = "reasoning"
	metaExtra     = "extra"
	metaID        = "id"
	metaName      = "name"
	metaIsError   = "is_error"
	metaUsage     = "usage"
)

// Usage counts the tokens of an exchange, as the providers report them:
// input and output count every token; the cache and reasoning counts
// say how many of them were read from or written to the prompt cache,
// or spent thinking. Its meta key holds them under these names.
type Usage struct {
	InputTokens      int `json:"input_tokens"`
	OutputTokens     int `json:"output_tokens"`
	CacheReadTokens  int `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int `json:"cache_write_tokens,omitempty"`
	ReasoningTokens  int `json:"reasoning_tokens,omitempty"`
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens,
		CacheReadTokens: u.CacheReadTokens + v.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens,
		ReasoningTokens: u.ReasoningTokens + v.ReasoningTokens}
}

// json is u as its meta key holds it.
func (u *Usage) json() map[string]any {
	m := map[string]any{"input_tokens": u.InputTokens, "output_tokens": u.OutputTokens}
	for k, v := range map[string]int{"cache_read_tokens": u.CacheReadTokens, "cache_write_tokens": u.CacheWriteTokens, "reasoning_tokens": u.ReasoningTokens} {
		if v != 0 {
			m[k] = v
		}
	}
	return m
}

// decodeUsage reads meta.usage: counts that are not numbers read as 0;
// a value that is not an object gives nil.
func decodeUsage(v any) *Usage {
	m, ok := v.(map[string]any)
	if !ok {
		return nil
	}
	n := func(k string) int {
		switch x := m[k].(type) {
		case float64:
			return int(x)
		case int:
			return x
		case int64:
			return int(x)
		case json.Number:
			i, _ := x.Int64()
			return int(i)
		}
		return 0
	}
	return &Usage{InputTokens: n("input_tokens"), OutputTokens: n("output_tokens"), CacheReadTokens: n("cache_read_tokens"),
		CacheWriteTokens: n("cache_write_tokens"), ReasoningTokens: n("reasoning_tokens")}
}

// readMeta is the known meta keys of a read event: the values as they
// were, and the typed fields they gave.
type readMeta struct {
	raw       map[string]any
	calls     []ToolCall
	reasoning string
	extra     map[string]any
	result    ToolResult
	usage     *Usage
}

// readBare marks the read events without known meta keys (most of them),
// without an allocation each.
var readBare = &readMeta{}

// JSON converts events to the reference's records.
func JSON(events []Event) []JSONEvent {
	out := make([]JSONEvent, len(events))
	for i, ev := range events {
		out[i] = ev.JSON()
	}
	return out
}

// FromJSON converts the reference's records to events.
func FromJSON(records []JSONEvent) []Event {
	out := make([]Event, len(records))
	for i, r := range records {
		out[i] = r.Event()
	}
	return out
}

// JSON is the event as the reference's record. Meta keys that were read
// and not changed keep their values as read (an id of null stays null, a
// provider's raw tool calls stay raw); new or changed ones are written as
// nb writes them.
func (e Event) JSON() JSONEvent {
	r := JSONEvent{At: e.At, Who: string(e.Who), Mode: e.Mode, Input: e.Input, Message: e.Message, Output: e.Output, Partial: e.Partial, Images: e.Images}
	meta := make(map[string]any, len(e.Meta)+3)
	maps.Copy(meta, e.Meta)
	rd := e.read
	// put writes key: as it was read when its typed value is unchanged,
	// else value when set is true; a key that was read and is now unset
	// goes away.
	put := func(key string, unchanged bool, set bool, value func() any) {
		if rd != nil {
			if raw, ok := rd.raw[key]; ok && unchanged {
				meta[key] = raw
				return
			}
		}
		if set {
			meta[key] = value()
			return
		}
		if rd != nil {
			if _, ok := rd.raw[key]; ok {
				delete(meta, key)
			}
		}
	}
	was := rd
	if was == nil {
		was = readBare
	}
	put(metaToolCalls, slices.Equal(e.ToolCalls, was.calls), len(e.ToolCalls) > 0, func() any { return callsJSON(e.ToolCalls) })
	put(metaReasoning, e.Reasoning == was.reasoning, e.Reasoning != "", func() any { return e.Reasoning })
	put(metaExtra, reflect.DeepEqual(e.Extra, was.extra), len(e.Extra) > 0, func() any { return e.Extra })
	// nb writes a result's id and name even when empty; an event read
	// without them keeps without them.
	tool := e.Who == RoleTool && rd == nil
	put(metaID, e.Result.ID == was.result.ID, tool || e.Result.ID != "", func() any { return e.Result.ID })
	put(metaName, e.Result.Name == was.result.Name, tool || e.Result.Name != "", func() any { return e.Result.Name })
	put(metaIsError, e.Result.IsError == was.result.IsError, e.Result.IsError, func() any { return true })
	put(metaUsage, equalUsage(e.Usage, was.usage), e.Usage != nil, func() any { return e.Usage.json() })
	if len(meta) > 0 {
		r.Meta = meta
	}
	return r
}

func equalUsage(a, b *Usage) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func callsJSON(calls []ToolCall) []any {
	out := make([]any, len(calls))
	for i, c := range calls {
		out[i] = map[string]any{"id": c.ID, "name": c.Name, "arguments": c.Arguments}
	}
	return out
}

// Event converts the reference's record. Known meta keys give the typed
// fields (a value of another type reads as the zero value, as the
// reference's readers do); the others stay in Meta.
func (r JSONEvent) Event() Event {
	e := Event{At: r.At, Who: Role(r.Who), Mode: r.Mode, Input: r.Input, Message: r.Message, Output: r.Output, Partial: r.Partial, Images: r.Images}
	e.read = readBare
	if len(r.Meta) == 0 {
		return e
	}
	rd := &readMeta{}
	for k, v := range r.Meta {
		switch k {
		case metaToolCalls:
			e.ToolCalls = decodeCalls(v)
		case metaReasoning:
			e.Reasoning, _ = v.(string)
		case metaExtra:
			e.Extra, _ = v.(map[string]any)
		case metaID:
			e.Result.ID, _ = v.(string)
		case metaName:
			e.Result.Name, _ = v.(string)
		case metaIsError:
			e.Result.IsError, _ = v.(bool)
		case metaUsage:
			e.Usage = decodeUsage(v)
		default:
			if e.Meta == nil {
				e.Meta = map[string]any{}
			}
			e.Meta[k] = v
			continue
		}
		if rd.raw == nil {
			rd.raw = map[string]any{}
		}
		rd.raw[k] = v
	}
	if rd.raw != nil {
		rd.calls, rd.reasoning, rd.extra, rd.result = slices.Clone(e.ToolCalls), e.Reasoning, e.Extra, e.Result
		if e.Usage != nil {
			u := *e.Usage
			rd.usage = &u
		}
		e.read = rd
	}
	return e
}

// decodeCalls reads meta.tool_calls: items that are not objects are left
// out, a missing id or name reads as empty, arguments that are not text
// are encoded as JSON (none: an empty object).
func decodeCalls(v any) []ToolCall {
	list, _ := v.([]any)
	var out []ToolCall
	for _, item := range list {
		m, _ := item.(map[string]any)
		if m == nil {
			continue
		}
		c := ToolCall{}
		c.ID, _ = m["id"].(string)
		c.Name, _ = m["name"].(string)
		switch args := m["arguments"].(type) {
		case string:
			c.Arguments = args
		case nil:
			c.Arguments = "{}"
		default:
			b, _ := json.Marshal(args)
			c.Arguments = string(b)
		}
		out = append(out, c)
	}
	return out
}

// MarshalJSON writes the event as the reference's record.
func (e Event) MarshalJSON() ([]byte, error) { return json.Marshal(e.JSON()) }

// UnmarshalJSON reads the reference's record.
func (e *Event) UnmarshalJSON(data []byte) error {
	var r JSONEvent
	if err := json.Unmarshal(data, &r); err != nil {
		return err
	}
	*e = r.Event()
	return nil
}
