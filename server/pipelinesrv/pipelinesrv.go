// Package pipelinesrv is the HTTP mode of attractor's pipelines
// (attractor-spec.md at fb57a55, §9.5) in nb serve: POST /pipelines
// starts a run of a DOT graph (sent as text, or a .dot file of a served
// folder) whose LLM nodes run served cartridges, and the run's routes
// give its state, its events as server-sent events, its human gates'
// questions and their answers, its checkpoint, its context, its
// artifacts and its drawing, cancel it, and resume it once stopped. The
// routes are behind the server's tokens, limits, Origin and Host checks
// (package server); each run is one of the server's runs (admission),
// and a run's human gate waiting for an answer counts as a run waiting
// on its client. Runs live behind the Runs interface: Local runs them in
// this process.
package pipelinesrv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/pipeline"
	"github.com/nbots/nb/pipeline/engine"
	"github.com/nbots/nb/pipeline/graphview"
	"github.com/nbots/nb/pipeline/handler"
	"github.com/nbots/nb/pipeline/runstore"
	"github.com/nbots/nb/server"
)

// Options configure the routes.
type Options struct {
	// Runs keeps the runs; nil is a Local in RunsDir.
	Runs Runs
	// RunsDir holds the run folders of the default Local ("" is
	// DefaultRunsDir).
	RunsDir string
	// Host is what the bots of LLM nodes that change their cartridge's
	// model or reasoning effort are built with (the server's), and
	// Environ (else Host.Environ) what tool commands draw their
	// allow-listed variables from; they run in WorkDir ("" is the
	// server's folder).
	Host    bot.Host
	Environ []string
	WorkDir string
	// Heartbeat is how often an idle event stream gets a comment line,
	// so that proxies keep it open (0: 15 s).
	Heartbeat time.Duration
	// Log receives the runs' troubles; nil is the server's log.
	Log *slog.Logger
}

// Handler serves the pipeline routes.
type Handler struct {
	srv  *server.Server
	opts Options
	runs Runs
	// drawing bounds the Graphviz processes that /graph runs at once.
	drawing chan struct{}
}

// Mount serves the pipeline routes on srv. Close stops the runs still
// going (each keeps its checkpoint); the server's shutdown, once its
// grace period is over, does too.
func Mount(srv *server.Server, o Options) *Handler {
	if o.Log == nil {
		o.Log = srv.Logger(context.Background())
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 15 * time.Second
	}
	if o.Environ == nil {
		o.Environ = o.Host.Environ
	}
	if o.RunsDir == "" {
		o.RunsDir = DefaultRunsDir(os.Getenv)
	}
	o.Host.AllowHostCredentials = true // the operator's cartridges only (Served)
	o.Host.AllowMCP = true
	h := &Handler{srv: srv, opts: o, runs: o.Runs, drawing: make(chan struct{}, 2)}
	if h.runs == nil {
		h.runs = &Local{Dir: o.RunsDir, Log: o.Log}
	}
	srv.HandleFunc("POST /pipelines", h.create)
	srv.HandleFunc("GET /pipelines", h.list)
	srv.HandleFunc("GET /pipelines/{id}", h.get)
	srv.HandleFunc("GET /pipelines/{id}/events", h.events)
	srv.HandleFunc("POST /pipelines/{id}/cancel", h.cancel)
	srv.HandleFunc("POST /pipelines/{id}/resume", h.resume)
	srv.HandleFunc("GET /pipelines/{id}/graph", h.graph)
	srv.HandleFunc("GET /pipelines/{id}/questions", h.questions)
	srv.HandleFunc("POST /pipelines/{id}/questions/{qid}/answer", h.answer)
	srv.HandleFunc("GET /pipelines/{id}/checkpoint", h.checkpoint)
	srv.HandleFunc("GET /pipelines/{id}/context", h.context)
	srv.HandleFunc("GET /pipelines/{id}/artifacts", h.artifacts)
	srv.HandleFunc("GET /pipelines/{id}/artifacts/{aid}", h.artifact)
	return h
}

// Close cancels the runs still going and waits for them.
func (h *Handler) Close() error { return h.runs.Close() }

// createRequest is POST /pipelines's body.
type createRequest struct {
	DOT       string            `json:"dot"`
	File      string            `json:"file"`
	Cartridge string            `json:"cartridge"`
	Set       map[string]string `json:"set"`
	MaxSteps  int               `json:"max_steps"`
	MaxTokens int               `json:"max_tokens"`
}

// diagnosticJSON is a diagnostic in a refusal.
type diagnosticJSON struct {
	Rule     string `json:"rule"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
	Node     string `json:"node,omitempty"`
	Edge     string `json:"edge,omitempty"`
	Line     int    `json:"line,omitempty"`
	Col      int    `json:"col,omitempty"`
	Text     string `json:"text"`
}

func (h *Handler) create(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	dec := json.NewDecoder(bytes.NewReader(readAll(r)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		h.fail(w, r, http.StatusBadRequest, "the body must be a JSON object {\"dot\": \"<graph>\"} or {\"file\": \"NAME.dot\"}, with optional \"cartridge\", \"set\", \"max_steps\", \"max_tokens\": %v", err)
		return
	}
	if (req.DOT == "") == (req.File == "") {
		h.fail(w, r, http.StatusBadRequest, "give either \"dot\" (the graph's text) or \"file\" (a .dot file of a served folder), not both or neither")
		return
	}
	if req.MaxSteps < 0 || req.MaxTokens < 0 {
		h.fail(w, r, http.StatusBadRequest, "max_steps and max_tokens are counts: 0 (the graph's) or more")
		return
	}
	for k := range req.Set {
		if strings.TrimSpace(k) == "" {
			h.fail(w, r, http.StatusBadRequest, "\"set\" has an empty variable name")
			return
		}
	}
	name, file, src := "", "", []byte(req.DOT)
	if req.File != "" {
		var err error
		if name, file, src, err = h.servedFile(req.File); err != nil {
			h.srv.WriteError(w, r, err)
			return
		}
	}
	g, ok := h.load(w, r, name, file, src, req.Set)
	if !ok {
		return
	}
	cart := req.Cartridge
	if cart == "" {
		cart = server.DefaultID
	}
	h.start(w, r, Spec{Graph: g, Source: src, Path: file,
		Params: Params{File: name, Cartridge: cart, Vars: req.Set, MaxSteps: req.MaxSteps, MaxTokens: req.MaxTokens}}, "")
}

// load reads a run's graph: name is the served file's ("" for a graph
// sent as text, which may run no command). It answers the refusals.
func (h *Handler) load(w http.ResponseWriter, r *http.Request, name, path string, src []byte, vars map[string]string) (*pipeline.Graph, bool) {
	display := name
	if display == "" {
		display = "pipeline.dot"
	}
	g, diags, err := pipeline.LoadWith(display, src, pipeline.LoadOptions{Vars: vars})
	if err != nil || pipeline.HasErrors(diags) {
		h.refuseGraph(w, display, diags, err)
		return nil, false
	}
	if path == "" {
		if why := commands(g); why != "" {
			h.fail(w, r, http.StatusForbidden, "%s: a graph sent as text may not run commands on the server (%s): put the flow in a served folder and send {\"file\": \"NAME.dot\"}", display, why)
			return nil, false
		}
	}
	return g, true
}

// start starts a run of spec (resume "") or resumes the run resume, on
// the request's admission and the server's cartridges, and answers.
func (h *Handler) start(w http.ResponseWriter, r *http.Request, spec Spec, resume string) {
	if err := h.prepare(r.Context(), &spec); err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	var (
		run Run
		err error
	)
	if resume == "" {
		run, err = h.runs.Start(spec)
	} else {
		run, err = h.runs.Resume(resume, spec)
	}
	if err != nil {
		spec.Done()
		if errors.Is(err, ErrNotStopped) {
			err = server.Errorf(http.StatusConflict, "run %s is not stopped (interrupted or cancelled): only such a run can be resumed", resume)
		}
		h.srv.WriteError(w, r, err)
		return
	}
	verb := "pipeline started"
	if resume != "" {
		verb = "pipeline resumed"
	}
	h.opts.Log.Info(verb, "run", run.ID(), "pipeline", spec.Graph.Name, "file", spec.Params.File, "cartridge", spec.Params.Cartridge, "request", server.RequestID(r.Context()))
	w.Header().Set("Location", "/pipelines/"+run.ID())
	status := http.StatusCreated
	if resume != "" {
		status = http.StatusOK
	}
	server.WriteJSON(w, status, map[string]any{"id": run.ID(), "status": StatusRunning})
}

// prepare readies spec to run for the request (or owner's context) ctx:
// its cartridge, its admission (Spec.Done ends it), its context and its
// handlers.
func (h *Handler) prepare(reqCtx context.Context, spec *Spec) error {
	if _, err := h.srv.Model(reqCtx, spec.Params.Cartridge); err != nil {
		return err
	}
	runCtx, done, err := h.srv.Admit(reqCtx, true)
	if err != nil {
		return err
	}
	ctx, stop := h.runContext(runCtx)
	backend := &handler.BotBackend{Host: h.opts.Host, Cartridge: spec.Params.Cartridge, Confirmer: h.srv.Confirmer(), Served: h.served}
	spec.Context, spec.Owner = ctx, server.Owner(reqCtx)
	spec.Handlers = handler.Options{Backend: backend, Environ: h.opts.Environ, Dir: h.opts.WorkDir}
	spec.Done = func() {
		stop()
		backend.Close() //nolint:errcheck // never fails
		done()
	}
	return nil
}

// Adopt takes over, every interval until ctx ends, the runs of a Stored
// (Options.Runs) whose replica died: each goes on here from its last
// checkpoint, with its owner's token, cartridge, variables and budgets.
// A run that cannot go on (its owner's token or its cartridge is no
// longer served, its graph does not load) is ended, so that it is not
// taken over again on every round. Without a Stored it returns at once.
func (h *Handler) Adopt(ctx context.Context, interval time.Duration) {
	st, ok := h.runs.(*Stored)
	if !ok {
		return
	}
	spec := func(owner string, p Params, g *pipeline.Graph, src []byte) (Spec, error) {
		octx, release, err := h.srv.OwnerContext(context.WithoutCancel(ctx), owner)
		if err != nil {
			return Spec{}, err
		}
		defer release() // the run holds its cartridge itself (Admit, detached)
		sp := Spec{Graph: g, Source: src, Params: p}
		if err := h.prepare(octx, &sp); err != nil {
			return Spec{}, err
		}
		return sp, nil
	}
	runstore.Adopt(ctx, st.Store, interval, func(r runstore.Run) { st.adopt(r, spec) }, func(err error) {
		h.opts.Log.Warn("pipeline runs to take over", "error", err)
	})
}

// resume is POST /pipelines/{id}/resume: a stopped run goes on from its
// checkpoint, its graph read again (a served file that changed since is
// refused), with the cartridge, variables and budgets it had.
func (h *Handler) resume(w http.ResponseWriter, r *http.Request) {
	run := h.run(w, r)
	if run == nil {
		return
	}
	p := run.Params()
	var (
		name, path string
		src        []byte
		err        error
	)
	if p.File != "" {
		name, path, src, err = h.servedFile(p.File)
	} else {
		src, err = run.Source()
	}
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	g, ok := h.load(w, r, name, path, src, p.Vars)
	if !ok {
		return
	}
	h.start(w, r, Spec{Graph: g, Source: src, Path: path, Params: p}, run.ID())
}

// reportFailure tells the server that a run failed, for the control
// page's last errors (server.RunFailed, called before the run's
// admission ends): the engine refused it, or it ended in fail. Only the
// kind is told ("error pipeline_refused", "error pipeline_failed"): the
// reasons are free text (a node's output, a provider's message), which
// the log and the run's events have. A run interrupted or lost to
// another replica did not fail.
func reportFailure(ctx context.Context, res *engine.Result, err error) {
	switch {
	case ctx == nil:
	case err != nil:
		server.RunFailed(ctx, &server.Error{Code: "pipeline_refused", Message: err.Error(), Err: err})
	case res == nil || res.Interrupted || res.Lost || res.Status == engine.Success:
	default:
		server.RunFailed(ctx, &server.Error{Code: "pipeline_failed", Message: res.FailureReason})
	}
}

// runContext is a pipeline run's context: the admitted run's values
// (its token, its admission, its cartridges held) without its deadline
// (--run-timeout bounds one exchange; a pipeline is many, and a human
// gate may wait for hours: its nodes' timeout attributes and its
// budgets bound it), ended when the server's shutdown cancels its runs.
func (h *Handler) runContext(admitted context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(admitted))
	stopped := make(chan struct{})
	go func() {
		select {
		case <-h.srv.Done():
			cancel(server.ErrShutdown)
		case <-stopped:
		}
	}()
	var once sync.Once
	return ctx, func() { once.Do(func() { close(stopped); cancel(nil) }) }
}

// served is the BotBackend's cartridge lookup: a served cartridge the
// run's token may use, held until the run ends.
func (h *Handler) served(ctx context.Context, name string) (*cartridge.Cartridge, *bot.Bot, error) {
	x, err := h.srv.Bot(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	m, err := h.srv.Model(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	if m.Cartridge == nil {
		return nil, nil, fmt.Errorf("the cartridge %q has no definition to run", name)
	}
	return m.Cartridge, x, nil
}

// servedFile finds a .dot file in the served folders: a relative path
// inside one of them (the first that has it), never leaving it, even
// through a symbolic link.
func (h *Handler) servedFile(name string) (display, abs string, src []byte, err error) {
	clean := filepath.ToSlash(filepath.Clean(filepath.FromSlash(name)))
	if !filepath.IsLocal(filepath.FromSlash(name)) || filepath.Ext(clean) != ".dot" {
		return "", "", nil, server.Errorf(http.StatusBadRequest, "\"file\" %q: name a .dot file by its path inside a served folder (no leading /, no ..)", name)
	}
	for _, part := range strings.Split(clean, "/") {
		if strings.HasPrefix(part, ".") {
			return "", "", nil, server.Errorf(http.StatusBadRequest, "\"file\" %q: hidden files and folders are not served", name)
		}
	}
	for _, dir := range h.srv.Dirs() {
		root, err := os.OpenRoot(dir)
		if err != nil {
			continue
		}
		data, err := root.ReadFile(clean)
		root.Close()
		if err == nil {
			a, _ := filepath.Abs(filepath.Join(dir, filepath.FromSlash(clean)))
			return clean, a, data, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			h.opts.Log.Warn("pipeline file not read", "file", filepath.Join(dir, clean), "error", err)
		}
	}
	return "", "", nil, server.Errorf(http.StatusNotFound, "\"file\" %q: no served folder has this file", name)
}

// commands says why a graph would run commands on the server ("" when
// it would not): tool nodes, tool hooks, a manager loop's child file.
func commands(g *pipeline.Graph) string {
	var why []string
	for _, k := range []string{"tool_hooks.pre", "tool_hooks.post"} {
		if g.Attrs.Has(k) {
			why = append(why, "the graph's "+k)
		}
	}
	for _, n := range g.Nodes {
		typ := n.Type()
		if typ == "" {
			typ = engine.ShapeTypes[n.Shape()]
		}
		switch typ {
		case "tool":
			why = append(why, "tool node "+n.ID)
		case "stack.manager_loop":
			why = append(why, "manager loop "+n.ID+" (it reads a child pipeline's file)")
		}
		for _, k := range []string{"tool_hooks.pre", "tool_hooks.post"} {
			if n.Has(k) {
				why = append(why, k+" on node "+n.ID)
			}
		}
	}
	return strings.Join(why, ", ")
}

// refuseGraph answers 422 with the graph's diagnostics.
func (h *Handler) refuseGraph(w http.ResponseWriter, name string, diags []pipeline.Diagnostic, err error) {
	var se *pipeline.SyntaxError
	if errors.As(err, &se) {
		diags, err = []pipeline.Diagnostic{se.Diagnostic()}, nil
	}
	list := []diagnosticJSON{}
	errs := 0
	first := ""
	for _, d := range diags {
		list = append(list, diagnosticJSON{Rule: d.Rule, Severity: d.Severity.String(), Message: d.Message, Node: d.Node, Edge: d.Edge,
			Line: d.Pos.Line, Col: d.Pos.Col, Text: d.String(name)})
		if d.Severity == pipeline.Error {
			errs++
			if first == "" {
				first = d.String(name)
			}
		}
	}
	msg := fmt.Sprintf("%s has %d errors: nothing was run; the first: %s", name, errs, first)
	if err != nil {
		msg = fmt.Sprintf("%s does not load: %v", name, err)
	}
	server.WriteJSON(w, http.StatusUnprocessableEntity, map[string]any{"error": map[string]any{"message": msg}, "diagnostics": list})
}

// run finds the request's run; it answers 404 itself.
func (h *Handler) run(w http.ResponseWriter, r *http.Request) Run {
	run, err := h.runs.Get(r.Context(), server.Owner(r.Context()), r.PathValue("id"))
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			h.fail(w, r, http.StatusNotFound, "there is no pipeline run %q (for this token)", r.PathValue("id"))
		} else {
			h.srv.WriteError(w, r, err)
		}
		return nil
	}
	return run
}

// list is GET /pipelines: the token's runs, the most recent first.
func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	infos, err := h.runs.List(r.Context(), server.Owner(r.Context()))
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	server.Quiet(r.Context())
	server.WriteJSON(w, http.StatusOK, map[string]any{"pipelines": infos})
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request) {
	if run := h.run(w, r); run != nil {
		server.Quiet(r.Context())
		server.WriteJSON(w, http.StatusOK, run.Info())
	}
}

func (h *Handler) questions(w http.ResponseWriter, r *http.Request) {
	if run := h.run(w, r); run != nil {
		server.Quiet(r.Context())
		server.WriteJSON(w, http.StatusOK, map[string]any{"questions": questionsJSON(run.Questions())})
	}
}

// questionJSON is §6.2's question as the routes show it: the timeout in
// seconds.
type questionJSON struct {
	handler.Question
	Timeout float64 `json:"timeout_seconds,omitempty"`
}

func questionsJSON(qs []handler.Question) []questionJSON {
	out := make([]questionJSON, len(qs))
	for i, q := range qs {
		out[i] = questionJSON{Question: q, Timeout: q.Timeout.Seconds()}
	}
	return out
}

// answerRequest is an answer's body: §6.3's answer, or its short forms
// {"answer": "A"} and {"key": "A"}.
type answerRequest struct {
	Value    string          `json:"value"`
	Answer   string          `json:"answer"`
	Key      string          `json:"key"`
	Text     string          `json:"text"`
	Selected *handler.Option `json:"selected_option"`
}

func (h *Handler) answer(w http.ResponseWriter, r *http.Request) {
	run := h.run(w, r)
	if run == nil {
		return
	}
	var req answerRequest
	dec := json.NewDecoder(bytes.NewReader(readAll(r)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		h.fail(w, r, http.StatusBadRequest, "the body must be a JSON object {\"value\": \"<option key, YES, NO, SKIPPED or text>\"}: %v", err)
		return
	}
	a := handler.Answer{Value: firstOf(req.Value, req.Answer, req.Key), Text: req.Text, Selected: req.Selected}
	if a.Value == "" && a.Selected != nil {
		a.Value = a.Selected.Key
	}
	if a.Value == "" && a.Text == "" {
		h.fail(w, r, http.StatusBadRequest, "the answer is empty: send {\"value\": \"A\"} (an option's key), YES, NO, SKIPPED, or {\"text\": \"…\"}")
		return
	}
	if a.Value == "" {
		a.Value = a.Text
	}
	qid := r.PathValue("qid")
	if err := run.Answer(r.Context(), qid, a); err != nil {
		if errors.Is(err, ErrNoQuestion) {
			h.fail(w, r, http.StatusNotFound, "no question %q waits for an answer in run %s (answered already, timed out, or never asked): GET /pipelines/%s/questions lists them", qid, run.ID(), run.ID())
			return
		}
		h.srv.WriteError(w, r, err)
		return
	}
	server.WriteJSON(w, http.StatusOK, map[string]any{"id": qid, "answer": a})
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

func (h *Handler) cancel(w http.ResponseWriter, r *http.Request) {
	run := h.run(w, r)
	if run == nil {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	if err := run.Cancel(ctx); err != nil {
		if se := (*server.Error)(nil); errors.As(err, &se) {
			h.srv.WriteError(w, r, err) // another replica runs it
			return
		}
		h.fail(w, r, http.StatusAccepted, "the run is stopping (%v): GET /pipelines/%s says when it has", err, run.ID())
		return
	}
	server.WriteJSON(w, http.StatusOK, run.Info())
}

func (h *Handler) checkpoint(w http.ResponseWriter, r *http.Request) {
	run := h.run(w, r)
	if run == nil {
		return
	}
	data, err := run.Checkpoint()
	if err != nil {
		h.noCheckpoint(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(data) //nolint:errcheck // the client went away
}

func (h *Handler) noCheckpoint(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, ErrNoCheckpoint) {
		h.fail(w, r, http.StatusNotFound, "%v", err)
		return
	}
	h.srv.WriteError(w, r, err)
}

// context is the context of the run's checkpoint: its values as the
// last finished node left them.
func (h *Handler) context(w http.ResponseWriter, r *http.Request) {
	run := h.run(w, r)
	if run == nil {
		return
	}
	data, err := run.Checkpoint()
	if err != nil {
		if errors.Is(err, ErrNoCheckpoint) {
			server.WriteJSON(w, http.StatusOK, map[string]any{"context": map[string]any{}})
			return
		}
		h.srv.WriteError(w, r, err)
		return
	}
	var cp struct {
		Context     json.RawMessage `json:"context"`
		CurrentNode string          `json:"current_node"`
	}
	if err := json.Unmarshal(data, &cp); err != nil {
		h.srv.WriteError(w, r, fmt.Errorf("the run's checkpoint does not parse: %w", err))
		return
	}
	server.WriteJSON(w, http.StatusOK, map[string]any{"context": cp.Context, "node": cp.CurrentNode})
}

// artifacts lists the run's artifacts (§5.5's ArtifactInfo each).
func (h *Handler) artifacts(w http.ResponseWriter, r *http.Request) {
	run := h.run(w, r)
	if run == nil {
		return
	}
	a, err := run.Artifacts()
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	server.WriteJSON(w, http.StatusOK, map[string]any{"artifacts": a.List()})
}

// artifact answers an artifact's data, as the JSON it was stored as.
func (h *Handler) artifact(w http.ResponseWriter, r *http.Request) {
	run := h.run(w, r)
	if run == nil {
		return
	}
	a, err := run.Artifacts()
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	data, err := a.Retrieve(r.PathValue("aid"))
	if errors.Is(err, engine.ErrNoArtifact) {
		h.fail(w, r, http.StatusNotFound, "run %s has no artifact %q (yet: GET /pipelines/%s/artifacts lists those of the nodes finished so far)", run.ID(), r.PathValue("aid"), run.ID())
		return
	}
	if err != nil {
		h.srv.WriteError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(data) //nolint:errcheck // the client went away
}

// graph draws the run's graph with its path: SVG through Graphviz's dot
// (the default, §9.5), ?format=dot or ?format=text.
func (h *Handler) graph(w http.ResponseWriter, r *http.Request) {
	run := h.run(w, r)
	if run == nil {
		return
	}
	path := &graphview.Path{}
	if data, err := run.Checkpoint(); err == nil {
		var cp struct {
			CompletedNodes []string `json:"completed_nodes"`
			CurrentNode    string   `json:"current_node"`
		}
		if json.Unmarshal(data, &cp) == nil {
			path.Completed, path.Current = cp.CompletedNodes, cp.CurrentNode
		}
	}
	var b bytes.Buffer
	switch format := r.URL.Query().Get("format"); format {
	case "text":
		graphview.Text(&b, run.Graph(), path) //nolint:errcheck // a buffer
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	case "dot":
		graphview.DOT(&b, run.Graph(), path) //nolint:errcheck // a buffer
		w.Header().Set("Content-Type", "text/vnd.graphviz; charset=utf-8")
	case "", "svg":
		dot, err := exec.LookPath("dot")
		if err != nil {
			h.fail(w, r, http.StatusNotImplemented, "the SVG drawing needs Graphviz's dot command on the server, which is not on its PATH (Debian: apt install graphviz): ask ?format=text or ?format=dot")
			return
		}
		select {
		case h.drawing <- struct{}{}:
			defer func() { <-h.drawing }()
		case <-r.Context().Done():
			return
		}
		var in, stderr bytes.Buffer
		graphview.DOT(&in, run.Graph(), path) //nolint:errcheck // a buffer
		ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, dot, "-Tsvg")
		cmd.Stdin, cmd.Stdout, cmd.Stderr = &in, &b, &stderr
		if err := cmd.Run(); err != nil {
			h.srv.WriteError(w, r, fmt.Errorf("Graphviz's dot failed (%v): %s", err, strings.TrimSpace(stderr.String())))
			return
		}
		w.Header().Set("Content-Type", "image/svg+xml")
	default:
		h.fail(w, r, http.StatusBadRequest, "format %q: use svg (the default), dot or text", format)
		return
	}
	w.Write(b.Bytes()) //nolint:errcheck // the client went away
}

// fail answers with a status and a message.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, status int, format string, args ...any) {
	h.srv.WriteError(w, r, server.Errorf(status, format, args...))
}

// readAll is the request's body, which the server has read already.
func readAll(r *http.Request) []byte {
	var b bytes.Buffer
	b.ReadFrom(r.Body) //nolint:errcheck // read whole by the server
	return b.Bytes()
}

// lastEventID is where a stream starts: Last-Event-ID (an EventSource
// reconnecting), else ?after=N, else the start.
func lastEventID(r *http.Request) (int64, error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("after")
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("Last-Event-ID (or after) %q: give the number of the last event received", v)
	}
	return n, nil
}
