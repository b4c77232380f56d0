// Package nanobots serves the Nano Bots API (the reference
// icebaker/nano-bots-api 1.9.0) on the nb server core: the cartridge
// listing, evaluations and boots in eval or REPL mode, and streams that
// clients poll, as the Sublime Text, VS Code and Obsidian plugins do, or
// read as server-sent events.
package nanobots

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/eventlog"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/server"
)

// APIVersion is the version of the reference API this package follows.
const APIVersion = "1.9.0"

// Options configure the API. Zero values take the defaults.
type Options struct {
	// Version and Specification are nb's, shown by GET /.
	Version, Specification string
	// PollHold is how long a poll of a pending stream whose output has
	// not changed waits for a change (default 250 ms; negative: none).
	PollHold time.Duration
	// StreamTTL is how long a finished stream can still be read
	// (default 10 minutes).
	StreamTTL time.Duration
	// AbandonAfter cancels a pending stream that nobody polled or read
	// for that long (default 30 s): the plugins' Stop only stops polling.
	AbandonAfter time.Duration
	// MaxStreams bounds the streams kept (default 10000); the oldest
	// finished ones are forgotten first.
	MaxStreams int
	// MaxOutput bounds the output of one stream in bytes (default
	// eventlog.DefaultMaxBytes, 64 MiB): beyond it the output is cut,
	// and a finished stream says so at the end of its output.
	MaxOutput int64
	// StreamBytes bounds the output of all the streams kept (default
	// DefaultStreamBytes): beyond it the oldest finished streams are
	// forgotten first, then the oldest running ones, which are stopped.
	StreamBytes int64
}

// DefaultStreamBytes is the default of Options.StreamBytes.
const DefaultStreamBytes int64 = 256 << 20

// API is the Nano Bots API mounted on a server.
type API struct {
	srv     *server.Server
	opts    Options
	streams *eventlog.Store[*stream]
	stop    chan struct{}
	// shared is the store of the server's replicas (nil: none): streams
	// run here are published there, and the streams of other replicas
	// are followed from there.
	shared   eventlog.Shared
	followMu sync.Mutex // one copy per stream
}

// New mounts the API's routes on srv and starts forgetting old streams
// until srv stops (or Close).
func New(srv *server.Server, opts Options) *API {
	if opts.PollHold == 0 {
		opts.PollHold = 250 * time.Millisecond
	}
	if opts.StreamTTL <= 0 {
		opts.StreamTTL = 10 * time.Minute
	}
	if opts.AbandonAfter == 0 {
		opts.AbandonAfter = 30 * time.Second
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = 10000
	}
	if opts.MaxOutput <= 0 {
		opts.MaxOutput = eventlog.DefaultMaxBytes
	}
	if opts.StreamBytes <= 0 {
		opts.StreamBytes = DefaultStreamBytes
	}
	a := &API{srv: srv, opts: opts, stop: make(chan struct{}), shared: srv.Shared()}
	a.streams = eventlog.NewStore(eventlog.Limits{Count: opts.MaxStreams, Bytes: opts.StreamBytes, TTL: opts.StreamTTL}, nil,
		func(_ string, s *stream) { s.cancel(eventlog.ErrEvicted) })
	srv.HandleFunc("GET /{$}", a.index)
	srv.HandleFunc("GET /cartridges", a.list)
	srv.HandleFunc("POST /cartridges/source", a.source)
	srv.HandleFunc("POST /cartridges", a.run)
	srv.HandleFunc("POST /cartridges/stream", a.createStream)
	srv.HandleFunc("GET /cartridges/stream/{id}", a.getStream)
	go a.janitor()
	return a
}

// Close stops the API's background work.
func (a *API) Close() {
	select {
	case <-a.stop:
	default:
		close(a.stop)
	}
}

func (a *API) janitor() {
	every := min(a.opts.StreamTTL, max(a.opts.AbandonAfter, time.Second)) / 4
	t := time.NewTicker(max(every, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-a.srv.Done():
			return
		case <-t.C:
			for _, s := range a.streams.Sweep(a.opts.AbandonAfter) {
				if !a.readElsewhere(s) {
					s.cancel(server.ErrClientGone)
				}
			}
		}
	}
}

func (a *API) index(w http.ResponseWriter, r *http.Request) {
	server.WriteJSON(w, http.StatusOK, indexJSON{
		Project:  "Nano Bots API",
		Version:  APIVersion,
		NanoBots: nanoBotsJSON{Version: a.opts.Version, Specification: a.opts.Specification, Implementation: "nb"},
		Docs:     "https://spec.nbots.io",
		Editor:   "https://clinic.nbots.io",
		GitHub:   "https://github.com/icebaker/nano-bots-api",
		Plugins: []string{
			"https://github.com/icebaker/sublime-nano-bots",
			"https://github.com/icebaker/vscode-nano-bots",
			"https://github.com/icebaker/obsidian-nano-bots",
		},
	})
}

// indexJSON is GET /, in the reference's order.
type indexJSON struct {
	Project  string       `json:"project"`
	Version  string       `json:"version"`
	NanoBots nanoBotsJSON `json:"nano-bots"`
	Docs     string       `json:"documentation"`
	Editor   string       `json:"live-editor"`
	GitHub   string       `json:"github"`
	Plugins  []string     `json:"plugins"`
}

type nanoBotsJSON struct {
	Version        string `json:"version"`
	Specification  string `json:"specification"`
	Implementation string `json:"implementation"`
}

// entryJSON is one cartridge of the listing. Every entry has a meta
// object with a name and a non-empty symbol: a missing symbol breaks
// Sublime Text's menu, a missing meta every plugin's.
type entryJSON struct {
	System systemJSON `json:"system"`
	Meta   any        `json:"meta"`
}

type systemJSON struct {
	ID string `json:"id"`
	// Error says why the cartridge failed to load (nb only).
	Error string `json:"error,omitempty"`
}

type metaJSON struct {
	Name        string `json:"name"`
	Author      any    `json:"author"`
	Version     any    `json:"version"`
	Symbol      string `json:"symbol"`
	Description any    `json:"description"`
}

// defaultMeta is the reference's entry for the built-in default.
type defaultMetaJSON struct {
	Name   string `json:"name"`
	Symbol string `json:"symbol"`
}

func orNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func entryOf(m server.Model) entryJSON {
	e := entryJSON{System: systemJSON{ID: m.ID}}
	if m.Err != nil {
		e.System.Error = m.Err.Error()
	}
	if m.ID == server.DefaultID {
		e.Meta = defaultMetaJSON{Name: "Default", Symbol: "🤖"}
		return e
	}
	meta := metaJSON{Name: m.ID, Symbol: "🤖"}
	if m.Cartridge != nil {
		cm := m.Cartridge.Meta()
		if cm.Name != "" {
			meta.Name = cm.Name
		}
		if cm.Symbol != "" {
			meta.Symbol = cm.Symbol
		}
		meta.Author, meta.Version, meta.Description = orNull(cm.Author), orNull(cm.Version), orNull(cm.Description)
	}
	if m.Err != nil {
		meta.Symbol = "⚠️"
	}
	e.Meta = meta
	return e
}

// list answers GET /cartridges: the cartridges sorted by name (in any
// case), the
// default first (a cartridge whose id is "default" takes the place of
// the built-in "-").
func (a *API) list(w http.ResponseWriter, r *http.Request) {
	models := a.srv.Models(r.Context())
	var first []server.Model
	var rest []server.Model
	for _, m := range models {
		if m.ID == server.DefaultID || strings.EqualFold(m.ID, "default") {
			first = append(first, m)
		} else {
			rest = append(rest, m)
		}
	}
	out := make([]entryJSON, 0, len(models))
	for _, m := range first {
		out = append(out, entryOf(m))
	}
	entries := make([]entryJSON, 0, len(rest))
	for _, m := range rest {
		entries = append(entries, entryOf(m))
	}
	sort.SliceStable(entries, func(i, j int) bool {
		ni, nj := strings.ToLower(entries[i].Meta.(metaJSON).Name), strings.ToLower(entries[j].Meta.(metaJSON).Name)
		if ni != nj {
			return ni < nj
		}
		return entries[i].System.ID < entries[j].System.ID
	})
	server.WriteJSON(w, http.StatusOK, append(out, entries...))
}

// source answers POST /cartridges/source {"id": …} with the cartridge's
// listing entry (404 for an unknown id, where the reference answers null:
// the plugins then show why).
func (a *API) source(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID *string `json:"id"`
	}
	if err := decode(r, &req); err != nil {
		a.srv.WriteError(w, r, err)
		return
	}
	if req.ID == nil {
		a.srv.WriteError(w, r, server.Errorf(http.StatusBadRequest, `the body needs the cartridge's id: {"id": "-"}`))
		return
	}
	m, err := a.srv.Model(r.Context(), *req.ID)
	if err != nil {
		a.srv.WriteError(w, r, err)
		return
	}
	server.WriteJSON(w, http.StatusOK, entryOf(m))
}

// decode reads a JSON request body into v; unknown fields (the plugins'
// mode and prefix) are ignored.
func decode(r *http.Request, v any) error {
	var body []byte
	if whole, ok := r.Body.(interface{ Bytes() []byte }); ok {
		body = whole.Bytes() // read whole by the server: no second copy
	} else {
		var buf bytes.Buffer
		if _, err := buf.ReadFrom(r.Body); err != nil {
			return err
		}
		body = buf.Bytes()
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return server.Errorf(http.StatusBadRequest, "the request body is empty: send a JSON object")
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return server.Errorf(http.StatusBadRequest, "the request body's %s must be %s, not %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
		}
		if errors.As(err, &te) {
			return server.Errorf(http.StatusBadRequest, "the request body must be a JSON object, not %s", te.Value)
		}
		return server.Errorf(http.StatusBadRequest, "the request body is not a JSON object: %v", err)
	}
	return nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string", "ptr":
		return "a string"
	case "struct", "map":
		return "an object"
	}
	return goKind
}

// runRequest is the body of POST /cartridges and /cartridges/stream.
type runRequest struct {
	Cartridge json.RawMessage `json:"cartridge"`
	State     *string         `json:"state"`
	Input     *string         `json:"input"`
	As        *string         `json:"as"`
	Action    *string         `json:"action"`
}

// job is a validated evaluation or boot.
type job struct {
	id    string // the cartridge's id, for the log
	bot   *bot.Bot
	x     bot.Exchange
	boot  bool
	input string
}

// prepare reads and checks a run request and finds its bot.
func (a *API) prepare(r *http.Request) (*job, error) {
	var req runRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	j := &job{x: bot.Exchange{Mode: cartridge.Eval, Wait: true, EndUser: a.srv.EndUser(r), Confirmer: a.srv.Confirmer()}}
	if req.As != nil {
		switch *req.As {
		case "eval", "":
		case "repl":
			j.x.Mode = cartridge.REPL
		default:
			return nil, server.Errorf(http.StatusBadRequest, "as is %q: use eval or repl", *req.As)
		}
	}
	if req.Action != nil {
		switch *req.Action {
		case "eval", "":
		case "boot":
			j.boot = true
		default:
			return nil, server.Errorf(http.StatusBadRequest, "action is %q: use eval or boot", *req.Action)
		}
	}
	if !j.boot {
		if req.Input == nil {
			return nil, server.Errorf(http.StatusBadRequest, `input is missing: give the message to send as "input"`)
		}
		j.input = *req.Input
	}
	if req.State != nil {
		if k := strings.TrimSpace(*req.State); k != "-" {
			j.x.Key = k
		}
	}
	raw := bytes.TrimSpace(req.Cartridge)
	switch {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
		return nil, server.Errorf(http.StatusBadRequest, `cartridge is missing: give a cartridge id ("-" for the default; GET /cartridges lists them) or a cartridge object`)
	case raw[0] == '"':
		var id string
		if err := json.Unmarshal(raw, &id); err != nil {
			return nil, server.Errorf(http.StatusBadRequest, "cartridge: %v", err)
		}
		b, err := a.srv.Bot(r.Context(), id)
		if err != nil {
			return nil, err
		}
		j.bot, j.id = b, id
	case raw[0] == '{':
		b, err := a.srv.ClientBot(r.Context(), raw)
		if err != nil {
			return nil, err
		}
		j.bot, j.id = b, server.ClientCartridgeName
	default:
		return nil, server.Errorf(http.StatusBadRequest, "cartridge must be a cartridge id (a string) or a cartridge (an object)")
	}
	if a.srv.LogMessages() {
		a.srv.Logger(r.Context()).Info("message", "input", j.input, "boot", j.boot, "state", j.x.Key)
	}
	return j, nil
}

// execute runs the job, writing what a terminal would show (without
// colour) to out: the output prefix, the answer as it streams, tool
// feedback, the suffix, and in REPL mode the prompt.
func (a *API) execute(ctx context.Context, j *job, out io.StringWriter) error {
	c, mode := j.bot.Cartridge, j.x.Mode
	log := a.srv.Logger(ctx)
	ctx = provider.WithAnswerLimit(ctx, a.opts.MaxOutput)
	wrote := false
	write := func(s string) {
		if s != "" {
			wrote = true
			out.WriteString(s) //nolint:errcheck // buffers in memory
		}
	}
	j.x.OnEvent = func(ev agent.Event) {
		switch ev.Kind {
		case agent.TextDelta, agent.Answer:
			write(ev.Text)
		case agent.Feedback:
			write(c.ToolSetting(mode, ev.Action, "prefix") + ev.Text + c.ToolSetting(mode, ev.Action, "suffix"))
		case agent.Retry:
			log.Info("provider request failed; retrying", "error", ev.Err.Error(), "attempt", ev.Attempt, "delay", ev.Delay.String())
		case agent.Waiting:
			log.Info(ev.Text)
		}
	}
	if !j.boot || j.bot.HasBoot() {
		write(c.Affix(mode, "output", "prefix"))
		var res *agent.Result
		var err error
		if j.boot {
			res, err = j.bot.Boot(ctx, j.x)
		} else {
			res, err = j.bot.Ask(ctx, j.x, j.input)
		}
		if err != nil {
			return err
		}
		if res != nil && res.Notice != "" {
			// A limit stopped the exchange before an answer: the client
			// reads why and how to go on where the answer would be.
			if wrote {
				write("\n\n")
			}
			write("[nb: " + res.Notice + "]")
		}
		write(c.Affix(mode, "output", "suffix"))
	}
	if mode == cartridge.REPL {
		if wrote {
			write("\n")
		}
		var prompt strings.Builder
		for _, p := range c.Prompt() {
			prompt.WriteString(p.Text)
		}
		write(prompt.String())
	}
	return nil
}

// runJSON is the stream object of the reference.
type runJSON struct {
	ID         any        `json:"id"`
	StartedAt  any        `json:"started_at"`
	FinishedAt any        `json:"finished_at"`
	State      string     `json:"state"`
	Output     string     `json:"output"`
	Error      *errorJSON `json:"error,omitempty"`
}

type errorJSON struct {
	Message string `json:"message"`
}

const timeLayout = "2006-01-02T15:04:05.000Z07:00"

func timeOrNull(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(timeLayout)
}

// run answers POST /cartridges: the whole evaluation in one answer. The
// run is the request's: a client that goes away cancels it.
func (a *API) run(w http.ResponseWriter, r *http.Request) {
	started := time.Now()
	j, err := a.prepare(r)
	if err != nil {
		a.srv.WriteError(w, r, err)
		return
	}
	ctx, done, err := a.srv.Admit(r.Context(), false)
	if err != nil {
		a.srv.WriteError(w, r, err)
		return
	}
	defer done()
	var out strings.Builder
	if err := a.execute(ctx, j, &out); err != nil {
		server.RunFailed(ctx, err)
		a.srv.WriteError(w, r.WithContext(ctx), a.failure(ctx, err))
		return
	}
	if a.srv.LogMessages() {
		a.srv.Logger(ctx).Info("answer", "output", out.String())
	}
	writeRun(w, http.StatusOK, runJSON{ID: nil, StartedAt: timeOrNull(started), FinishedAt: timeOrNull(time.Now()), State: stateFinished, Output: out.String()})
}

// failure is the error a client sees for a failed run; a failure of nb
// itself is logged with its stack.
func (a *API) failure(ctx context.Context, err error) error {
	var pe *bot.PanicError
	if errors.As(err, &pe) {
		a.srv.Logger(ctx).Error("internal error (please report it)", "panic", fmt.Sprint(pe.Value), "stack", string(pe.Stack))
	}
	return server.AsError(ctx, err)
}

// createStream answers POST /cartridges/stream: the evaluation runs on
// after the answer, which carries the id to poll.
func (a *API) createStream(w http.ResponseWriter, r *http.Request) {
	j, err := a.prepare(r)
	if err != nil {
		a.srv.WriteError(w, r, err)
		return
	}
	runCtx, done, err := a.srv.Admit(r.Context(), true)
	if err != nil {
		a.srv.WriteError(w, r, err)
		return
	}
	ctx, cancel := context.WithCancelCause(runCtx)
	now := time.Now()
	s := &stream{Log: eventlog.New(a.opts.MaxOutput), cancel: cancel}
	id, owner := eventlog.NewID(), server.Owner(r.Context())
	a.streams.Put(id, owner, s, 0)
	if err := a.publish(r.Context(), id, owner, s); err != nil {
		a.streams.Delete(id, owner)
		cancel(err)
		done()
		a.srv.WriteError(w, r, err)
		return
	}
	go func() {
		defer done()
		defer cancel(nil)
		log := a.srv.Logger(ctx).With("stream", s.ID(), "cartridge", j.id)
		err := a.execute(ctx, j, s)
		if err != nil {
			server.RunFailed(ctx, err)
			e := server.AsError(ctx, a.failure(ctx, err))
			log.Warn("stream failed", "status", e.Status, "error", e.Message, "duration", time.Since(now).String())
			s.Finish(err, e.Message)
			return
		}
		s.Finish(nil, "")
		attrs := []any{"duration", time.Since(now).String()}
		if st := s.State(); st.Cut {
			attrs = append(attrs, "cut_at_bytes", a.opts.MaxOutput)
		}
		if a.srv.LogMessages() {
			attrs = append(attrs, "output", a.snapshot(s).output)
		}
		log.Info("stream finished", attrs...)
	}()
	if wantsEvents(r) {
		a.events(w, r, s, 0, true)
		return
	}
	writeRun(w, http.StatusOK, snapshotJSON(a.snapshot(s)))
}

func snapshotJSON(s snapshot) runJSON {
	out := runJSON{ID: s.id, StartedAt: timeOrNull(s.started), FinishedAt: timeOrNull(s.finished), State: s.state, Output: s.output}
	if s.state == stateFailed {
		out.Error = &errorJSON{Message: s.errMsg}
	}
	return out
}

// getStream answers GET /cartridges/stream/{id}: the stream so far
// (always 200 but for a failed stream, 500 as the reference), or its
// events when the client asks for text/event-stream.
func (a *API) getStream(w http.ResponseWriter, r *http.Request) {
	s, err := a.lookup(r.Context(), r.PathValue("id"), server.Owner(r.Context()))
	if err != nil {
		a.srv.WriteError(w, r, err)
		return
	}
	if wantsEvents(r) {
		if s == nil {
			a.unknownEvents(w)
			return
		}
		a.events(w, r, s, lastEventID(r), false)
		return
	}
	server.Quiet(r.Context())
	if s == nil {
		writeRun(w, http.StatusOK, runJSON{State: stateUnknown})
		return
	}
	a.hold(r.Context(), s, a.opts.PollHold)
	s.polling.Lock()
	defer s.polling.Unlock()
	snap := a.snapshot(s)
	s.served.Store(int64(len(snap.output)))
	status := http.StatusOK
	if snap.state == stateFailed {
		status = http.StatusInternalServerError
	}
	writeRun(w, status, snapshotJSON(snap))
}

// wantsEvents reports whether the client asked for server-sent events by
// name: never for */* (the Obsidian plugin's Accept).
func wantsEvents(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		for _, part := range strings.Split(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err == nil && mt == "text/event-stream" && params["q"] != "0" {
				return true
			}
		}
	}
	return false
}
