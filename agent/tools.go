package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/internal/metric"
	"github.com/nbots/nb/media"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/script"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/tool"
	"github.com/nbots/nb/tracing"
)

// job is one tool call of a round.
type job struct {
	call tool.Call
	tool tool.Tool
	// args is the arguments' JSON text as the model sent them, compact:
	// the feedback shows them in the model's key order, as the reference.
	args string
	// external marks a call to a tool the client runs (Agent.External).
	external bool
	// result is set before running when the call cannot run (unknown
	// tool, invalid arguments, denied).
	result  any
	images  []media.Image
	isError bool
	done    bool
	denied  bool
}

// runTools handles a round of tool calls: store the calls, check and
// confirm each (one by one), run the allowed ones in parallel, show the
// feedback, store the results in call order. Calls to External tools are
// not run: they are returned for the client, after the others ran.
func (a *Agent) runTools(ctx context.Context, resp *provider.Response) ([]tool.Call, error) {
	empty := a.Cartridge.Affix(a.Mode, "output", "prefix") + a.Cartridge.Affix(a.Mode, "output", "suffix")
	var message any
	if resp.Text != "" {
		message = resp.Text
	}
	ev := state.Event{At: state.Now(), Who: state.RoleAI, Mode: string(a.Mode), Message: message, Output: &empty}
	withResponse(&ev, resp)
	if err := a.record(ev); err != nil {
		return nil, err
	}
	jobs := make([]*job, len(resp.ToolCalls))
	for i, pc := range resp.ToolCalls {
		j := &job{call: tool.Call{ID: pc.ID, Name: pc.Name, Arguments: map[string]any{}}, args: "{}"}
		jobs[i] = j
		if strings.TrimSpace(pc.Arguments) != "" {
			dec := json.NewDecoder(strings.NewReader(pc.Arguments))
			dec.UseNumber()
			var args map[string]any
			if err := dec.Decode(&args); err != nil {
				j.result, j.done, j.isError = fmt.Sprintf("Invalid arguments for tool %s: the arguments are not a JSON object (%v).", pc.Name, err), true, true
				continue
			}
			if args != nil {
				j.call.Arguments = normalizeNumbers(args).(map[string]any)
				j.args = compactJSON(pc.Arguments)
			}
		}
		if a.isExternal(pc.Name) {
			j.external, j.done = true, true
			continue
		}
		t, ok := a.Tools.Lookup(pc.Name)
		if !ok {
			j.result, j.done, j.isError = fmt.Sprintf("Unknown tool: %s. The available tools are: %s.", pc.Name, a.toolNames()), true, true
			continue
		}
		j.tool = t
		if msg := validateArguments(t.Spec(), j.call.Arguments); msg != "" {
			j.result, j.done, j.isError = msg, true, true
		}
	}

	if a.Cartridge.Confirmable() {
		for _, j := range jobs {
			if j.done || readOnly(j.tool) {
				continue
			}
			allowed, err := a.confirm(ctx, j)
			if err != nil || ctx.Err() != nil {
				if err == nil {
					err = ctx.Err()
				}
				return nil, a.interrupted(ctx, jobs, err)
			}
			if !allowed {
				j.result, j.done, j.denied = DenialText, true, true
			}
		}
	}

	var live sync.Mutex // the round's calls show their output one piece at a time
	run := func(j *job) { a.execute(ctx, j, &live) }
	var runnable []*job
	for _, j := range jobs {
		if j.done && !j.external && !j.denied {
			// A call that cannot run (an unknown tool, invalid
			// arguments) is still a call: it starts and ends.
			c := j.call
			a.emit(Event{Kind: ToolStart, Call: &c})
		}
		if j.done {
			continue
		}
		a.feedback(ctx, cartridge.Executing, j, nil)
		c := j.call
		a.emit(Event{Kind: ToolStart, Call: &c})
		runnable = append(runnable, j)
	}
	if len(runnable) == 1 {
		// One call runs on the loop's own goroutine: an exchange waiting
		// on a long call (a websocket client's tool) holds one stack, not two.
		run(runnable[0])
	} else {
		var wg sync.WaitGroup
		for _, j := range runnable {
			wg.Add(1)
			go func() {
				defer wg.Done()
				run(j)
			}()
		}
		wg.Wait()
	}
	if ctx.Err() != nil {
		return nil, a.interrupted(ctx, jobs, ctx.Err())
	}

	events := make([]state.Event, 0, len(jobs))
	var pending []tool.Call
	for _, j := range jobs {
		if j.external {
			pending = append(pending, j.call)
			continue
		}
		if j.tool != nil && !j.denied {
			a.feedback(ctx, cartridge.Responding, j, j.result)
		}
		if !j.denied {
			c := j.call
			a.emit(Event{Kind: ToolEnd, Call: &c, Output: j.result, IsError: j.isError})
		}
		events = append(events, a.resultEvent(j))
	}
	if err := a.record(events...); err != nil {
		return nil, err
	}
	return pending, nil
}

// isExternal tells whether name is one of the client's tools.
func (a *Agent) isExternal(name string) bool {
	for _, sp := range a.External {
		if sp.Name == name {
			return true
		}
	}
	return false
}

// readOnly tells whether t changes nothing, and so runs unasked.
func readOnly(t tool.Tool) bool {
	r, ok := t.(tool.ReadOnly)
	return ok && r.ReadOnly()
}

// resultEvent is the stored result of a call: the output, bounded by
// MaxStored (the whole of a larger one is kept by the conversation).
func (a *Agent) resultEvent(j *job) state.Event {
	return state.Event{At: state.Now(), Who: state.RoleTool, Mode: string(a.Mode), Message: a.bounded(j), Images: j.images,
		Result: state.ToolResult{ID: j.call.ID, Name: j.call.Name, IsError: j.isError}}
}

// bounded returns a job's result as it is stored: whole when small, else
// its head and tail with a note saying how much was left out and where
// the whole output is.
func (a *Agent) bounded(j *job) any {
	limit := a.MaxStored
	if limit <= 0 {
		limit = DefaultMaxStored
	}
	text, isText := j.result.(string)
	if !isText {
		if size := jsonSize(j.result, limit); size <= limit {
			return j.result
		}
		text = Text(j.result)
	}
	if len(text) <= limit {
		return j.result
	}
	where := ""
	if keeper, ok := a.conversation().(OutputKeeper); ok {
		if path, err := keeper.KeepOutput(j.call.ID, text); err == nil {
			where = "; the whole output is in " + path
		} else {
			where = "; it could not be kept whole: " + err.Error()
		}
	}
	half := limit / 2
	head, tail := text[:runeStart(text, half)], text[runeStart(text, len(text)-half):]
	return fmt.Sprintf("%s\n\n[nb: this output had %d bytes; %d from its middle are not kept in the conversation%s]\n\n%s",
		head, len(text), len(text)-len(head)-len(tail), where, tail)
}

// runeStart backs off i to the start of the UTF-8 sequence it falls in.
func runeStart(s string, i int) int {
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// jsonSize is the size of v encoded as JSON, counted up to limit+1.
func jsonSize(v any, limit int) int {
	w := &countWriter{limit: limit}
	json.NewEncoder(w).Encode(v) //nolint:errcheck // the count stops it
	return w.n
}

type countWriter struct{ n, limit int }

var errCounted = errors.New("counted")

func (w *countWriter) Write(p []byte) (int, error) {
	w.n += len(p)
	if w.n > w.limit {
		return 0, errCounted
	}
	return len(p), nil
}

// InterruptedText is the result of a call that never ran because the
// user stopped the exchange (Ctrl-C) first.
const InterruptedText = "The user interrupted the conversation before this tool call ran."

// interrupted records a result for every call of a stopped round, so the
// stored calls are never left without results (providers refuse a
// conversation where they are), and returns err.
func (a *Agent) interrupted(_ context.Context, jobs []*job, err error) error {
	events := make([]state.Event, 0, len(jobs))
	for _, j := range jobs {
		if !j.done || j.external {
			j.result, j.done = InterruptedText, true
		}
		events = append(events, a.resultEvent(j))
	}
	if rerr := a.record(events...); rerr != nil {
		return rerr
	}
	return err
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return strconv.Itoa(n) + " " + many
}

func (a *Agent) toolNames() string {
	var names []string
	for _, sp := range a.Tools.Specs() {
		names = append(names, sp.Name)
	}
	for _, sp := range a.External {
		names = append(names, sp.Name)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// toolErrorText is what the model receives when a tool fails: the error
// itself, as the reference returns a Lua error's message.
func toolErrorText(err error) string {
	var le *script.LimitError
	if errors.As(err, &le) {
		return le.Error()
	}
	return err.Error()
}

// confirm asks the front-end about one call; true allows it. An error
// (the user stopped the exchange at the question) stops the round.
func (a *Agent) confirm(ctx context.Context, j *job) (bool, error) {
	text := a.feedbackText(ctx, cartridge.Confirming, j, nil)
	if a.Confirmer == nil {
		return false, nil
	}
	return a.Confirmer.Confirm(ctx, j.call, text)
}

// feedback emits executing or responding feedback when the cartridge
// shows it.
func (a *Agent) feedback(ctx context.Context, action cartridge.ToolAction, j *job, output any) {
	if !a.Cartridge.Feedback(a.Mode, action) {
		return
	}
	c := j.call
	a.emit(Event{Kind: Feedback, Action: action, Call: &c, Text: a.feedbackText(ctx, action, j, output)})
}

// feedbackText is the adapter's result, or the reference's default text:
// "<name> <arguments as JSON>", plus "\n<output>" when responding.
func (a *Agent) feedbackText(ctx context.Context, action cartridge.ToolAction, j *job, output any) string {
	call := j.call
	name := call.Name
	if a.Tools != nil {
		if t, ok := a.Tools.Lookup(call.Name); ok {
			name = t.Spec().Name
		}
	}
	src, err := a.Cartridge.FeedbackAdapter(a.Mode, action)
	if err == nil && src != nil {
		var idValue any
		if call.ID != "" {
			idValue = call.ID
		}
		text, err := a.runAdapter(ctx, src,
			script.Param{Name: "id", Value: idValue},
			script.Param{Name: "name", Value: name},
			script.Param{Name: "parameters", Value: call.Arguments},
			script.Param{Name: "parameters-as-json", Value: j.args},
			script.Param{Name: "output", Value: output})
		if err == nil {
			return text
		}
		return err.Error()
	}
	if err != nil {
		return err.Error()
	}
	text := name + " " + j.args
	if action == cartridge.Responding {
		text += "\n" + Text(output)
	}
	return text
}

// validateArguments checks arguments against the tool's schema and
// returns the message for the model, or "" when they are valid.
func validateArguments(spec tool.Spec, args map[string]any) string {
	sch, err := compileSchema(spec)
	if err != nil || sch == nil {
		return "" // a schema the validator cannot read is the provider's business
	}
	if err := sch.Validate(toSchemaValue(args)); err != nil {
		msg := strings.TrimPrefix(err.Error(), "validating root: ")
		msg = strings.TrimPrefix(msg, "validating ")
		// "/properties/a/properties/b: type: ..." -> "field a.b: type: ..."
		msg = schemaPath().ReplaceAllStringFunc(msg, func(p string) string {
			return "field " + strings.ReplaceAll(strings.TrimPrefix(p, "/properties/"), "/properties/", ".")
		})
		return fmt.Sprintf("Invalid arguments for tool %s: %s. Call it again with arguments that match its parameters.", spec.Name, msg)
	}
	return ""
}

// schemaPath matches the validator's location of a property.
var schemaPath = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(/properties/[^/:]+)+`) })

// maxCachedSchemas bounds the compiled schemas kept: clients describe
// tools of their own (an agent-protocol run, a websocket client), so a
// long-running server sees schemas without end.
const maxCachedSchemas = 256

var (
	schemaMu    sync.Mutex
	schemaCache = map[string]*jsonschema.Resolved{}
)

func compileSchema(spec tool.Spec) (*jsonschema.Resolved, error) {
	key, err := json.Marshal(spec.Parameters)
	if err != nil {
		return nil, err
	}
	schemaMu.Lock()
	defer schemaMu.Unlock()
	if s, ok := schemaCache[string(key)]; ok {
		return s, nil
	}
	if len(schemaCache) >= maxCachedSchemas {
		// Start afresh: the schemas in use are compiled again at once.
		clear(schemaCache)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(key, &s); err != nil {
		schemaCache[string(key)] = nil
		return nil, err
	}
	r, err := s.Resolve(nil)
	if err != nil {
		schemaCache[string(key)] = nil
		return nil, err
	}
	schemaCache[string(key)] = r
	return r, nil
}

// compactJSON is raw JSON text without insignificant spaces, in its own
// key order and with its own escapes ("<" stays "<").
func compactJSON(raw string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(strings.TrimSpace(raw))); err != nil {
		return raw
	}
	return b.String()
}

// toSchemaValue re-reads args as plain JSON values (float64 numbers).
func toSchemaValue(args map[string]any) any {
	b, _ := json.Marshal(args)
	var v any
	if json.Unmarshal(b, &v) != nil {
		return args
	}
	return v
}

// normalizeNumbers turns json.Number into int64 when integral, else
// float64, so Lua sees integers as integers.
func normalizeNumbers(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			t[k] = normalizeNumbers(x)
		}
		return t
	case []any:
		for i, x := range t {
			t[i] = normalizeNumbers(x)
		}
		return t
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		f, _ := t.Float64()
		return f
	}
	return v
}

func formatFloat(f float64) string {
	if f == float64(int64(f)) && f < 1e15 && f > -1e15 {
		return strconv.FormatFloat(f, 'f', 1, 64) // Lua 5.4 prints 5.0
	}
	return strconv.FormatFloat(f, 'g', 14, 64)
}

// execute runs the call of j as every call runs, in a round or alone
// (callTool): its output shown live (under live), counted in nb's
// metrics and traced as one span, a panic made its failed result. It
// sets j's result, images, isError and done.
func (a *Agent) execute(ctx context.Context, j *job, live *sync.Mutex) {
	defer metric.ToolDone(j.call.Name, time.Now(), &j.isError)
	toolCtx, done := a.liveContext(ctx, j.call, live)
	defer done()
	toolCtx, span := tracing.StartTool(toolCtx, j.call.Name, j.call.ID)
	var runErr error
	defer func() { tracing.EndTool(span, j.isError, runErr) }()
	defer func() {
		// A broken tool must not take the conversation down: its
		// panic is its result, as an error would be.
		if p := recover(); p != nil {
			j.result, j.isError, j.done = fmt.Sprintf("the tool %s failed: %v", j.call.Name, p), true, true
		}
	}()
	out, err := j.tool.Run(toolCtx, j.call)
	runErr = err
	switch r := out.(type) {
	case *tool.Result:
		if r != nil {
			out, j.images, j.isError = r.Text, r.Images, r.IsError
		}
	case tool.Result:
		out, j.images, j.isError = r.Text, r.Images, r.IsError
	}
	if err != nil {
		out, j.isError = toolErrorText(err), true
	}
	j.result, j.done = jsonSafe(out), true
}
