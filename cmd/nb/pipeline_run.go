package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/pipeline"
	"github.com/nbots/nb/pipeline/engine"
	"github.com/nbots/nb/pipeline/handler"
	"github.com/nbots/nb/term"
)

// pipelineRun is `nb pipeline run FLOW.dot`: check the flow, run it in a
// run folder, show it live (a terminal) or one line per event (a pipe).
func (a *App) pipelineRun(args []string) error {
	fs := a.flags("nb pipeline run", "nb pipeline run [flags] FLOW.dot", `Runs the pipeline of FLOW.dot (attractor's DOT pipelines): its LLM nodes are
exchanges of a cartridge, its tool nodes shell commands, its human gates
questions on the terminal. The run folder (--logs) keeps manifest.json,
checkpoint.json (after every node) and a folder per node; nb pipeline resume
continues a run that stopped. Exit 0 when the run ends in success, 1 otherwise.`)
	cart := fs.String("cartridge", "", "the `CART`ridge of LLM nodes that name none (default: the default cartridge)")
	logs := fs.String("logs", "", "the run folder (`DIR`; default: pipeline-runs/NAME-TIME)")
	sets := fs.StringArray("set", nil, "a variable for the prompts, `key=value` ($key is replaced; repeatable)")
	autoApprove := fs.Bool("auto-approve", false, "answer every human gate with its first choice (for CI)")
	events := fs.String("events", "", "write the run's events to `FILE` as JSON lines")
	maxSteps := fs.Int("max-steps", 0, "stop the run after `N` stages (default: the graph's max_steps, else none)")
	maxTokens := fs.Int("max-tokens", 0, "stop the run once it has used `N` tokens (default: the graph's max_tokens, else none)")
	simulate := fs.Bool("simulate", false, "run no model: LLM nodes answer \"[Simulated] Response for stage: ID\"")
	gatewayConfig := fs.String("gateway-config", "", "the gateway configuration (`FILE`) whose channels ask the gates with human.channel (default: nb gateway's)")
	storeURL := fs.String("store", "", "keep the checkpoint and the events in the run store at `URL` (postgres://… or file:///folder): another process can resume the run (nb pipeline resume --store URL ID) and follow it (nb pipeline events)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return &usageError{"nb pipeline run needs one flow file: nb pipeline run FLOW.dot"}
	}
	vars := map[string]string{}
	for _, kv := range *sets {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return &usageError{fmt.Sprintf("--set %q: write key=value", kv)}
		}
		vars[strings.TrimSpace(k)] = v
	}
	file := fs.Arg(0)
	g, src, err := a.loadPipeline(file, vars)
	if err != nil {
		return err
	}
	dir := *logs
	if dir == "" {
		name := g.Name
		if name == "" {
			name = strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
		}
		dir = filepath.Join("pipeline-runs", name+"-"+time.Now().UTC().Format("20060102-150405"))
	}
	cfg := engine.Config{Graph: g, Source: src, File: file, LogsRoot: dir, Vars: vars, Cartridge: *cart, MaxSteps: *maxSteps, MaxTokens: *maxTokens}
	if *simulate {
		cfg.Cartridge = simulateCartridge
	}
	if *storeURL != "" {
		release, err := a.createStoredRun(*storeURL, &cfg)
		if err != nil {
			return err
		}
		defer release()
	}
	return a.runPipeline(cfg, *autoApprove, *events, *gatewayConfig, func(ctx context.Context, cfg engine.Config) (*engine.Result, error) {
		return logsAdvice(engine.Run(ctx, cfg))
	})
}

// simulateCartridge marks a run without a model in its checkpoint, so
// that its resume runs without one too.
const simulateCartridge = "nb:simulate"

// pipelineResume is `nb pipeline resume DIR`.
func (a *App) pipelineResume(args []string) error {
	fs := a.flags("nb pipeline resume", "nb pipeline resume [flags] DIR", `Continues the pipeline run in DIR (its --logs folder) from DIR/checkpoint.json:
no node the checkpoint lists as completed runs again. The flow file is read
again from where the run read it; a checkpoint written for another version of
it, or one that does not parse, is refused.`)
	autoApprove := fs.Bool("auto-approve", false, "answer every human gate with its first choice (for CI)")
	events := fs.String("events", "", "append the run's events to `FILE` as JSON lines")
	maxSteps := fs.Int("max-steps", 0, "stop the run after `N` stages in all (default: the graph's max_steps)")
	maxTokens := fs.Int("max-tokens", 0, "stop the run once it has used `N` tokens in all (default: the graph's max_tokens)")
	flow := fs.String("flow", "", "read the flow from `FILE` instead of the path the checkpoint names")
	gatewayConfig := fs.String("gateway-config", "", "the gateway configuration (`FILE`) whose channels ask the gates with human.channel (default: nb gateway's)")
	storeURL := fs.String("store", "", "take over the run ID of the run store at `URL` (postgres://… or file:///folder) instead of a run folder's; it must not be held by a live process")
	logs := fs.String("logs", "", "with --store, the folder of the stage folders (`DIR`; default: pipeline-runs/ID)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return &usageError{"nb pipeline resume needs the run folder: nb pipeline resume DIR (or nb pipeline resume --store URL ID)"}
	}
	if *storeURL != "" {
		cfg, release, err := a.takeStoredRun(*storeURL, fs.Arg(0), *logs, *flow)
		if err != nil {
			return err
		}
		defer release()
		cfg.MaxSteps, cfg.MaxTokens = *maxSteps, *maxTokens
		return a.runPipeline(cfg, *autoApprove, *events, *gatewayConfig, func(ctx context.Context, cfg engine.Config) (*engine.Result, error) {
			return logsAdvice(engine.Resume(ctx, cfg))
		})
	}
	dir := fs.Arg(0)
	cp, err := engine.LoadCheckpoint(dir)
	if _, err := logsAdvice(nil, err); err != nil {
		return err
	}
	file := cp.GraphFile
	if *flow != "" {
		file = *flow
	}
	g, src, err := a.loadPipeline(file, cp.Vars)
	if err != nil {
		return err
	}
	cfg := engine.Config{Graph: g, Source: src, File: file, LogsRoot: dir, Vars: cp.Vars, Cartridge: cp.Cartridge, MaxSteps: *maxSteps, MaxTokens: *maxTokens}
	return a.runPipeline(cfg, *autoApprove, *events, *gatewayConfig, func(ctx context.Context, cfg engine.Config) (*engine.Result, error) {
		return logsAdvice(engine.Resume(ctx, cfg))
	})
}

// loadPipeline reads and checks a flow: diagnostics are printed as
// file:line:col; an error refuses the run.
func (a *App) loadPipeline(file string, vars map[string]string) (*pipeline.Graph, []byte, error) {
	src, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, fmt.Errorf("read the flow: %w", err)
	}
	return a.loadPipelineSource(file, src, vars)
}

// loadPipelineSource is loadPipeline of a flow's text.
func (a *App) loadPipelineSource(file string, src []byte, vars map[string]string) (*pipeline.Graph, []byte, error) {
	g, diags, err := pipeline.LoadWith(file, src, pipeline.LoadOptions{Vars: vars})
	for _, d := range diags {
		fmt.Fprintln(a.Stderr, d.String(file))
	}
	if err != nil {
		return nil, nil, err
	}
	if pipeline.HasErrors(diags) {
		return nil, nil, &reportedError{fmt.Sprintf("%s has errors: nothing was run (nb pipeline check %s lists them)", file, file)}
	}
	return g, src, nil
}

// runPipeline wires the handlers, the display and the signals, runs, and
// turns the result into nb's exit status.
func (a *App) runPipeline(cfg engine.Config, autoApprove bool, eventsFile, gatewayConfig string, run func(context.Context, engine.Config) (*engine.Result, error)) error {
	cfg.Advice = engine.Advice{MaxSteps: "--max-steps N", MaxTokens: "--max-tokens N", ResumeStored: "nb pipeline resume --store URL %s"}
	var observers engine.Observers
	if eventsFile != "" {
		f, err := os.OpenFile(eventsFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return fmt.Errorf("--events: %w", err)
		}
		defer f.Close()
		jl := engine.NewJSONLines(f)
		observers = append(observers, jl)
		defer func() {
			if err := jl.Err(); err != nil {
				fmt.Fprintf(a.Stderr, "nb: warning: --events %s: %v\n", eventsFile, err)
			}
		}()
	}
	live := term.IsTerminal(a.Stdout) && a.Getenv("TERM") != "dumb" && a.Getenv("TERM") != ""
	view := &pipelineView{w: a.Stdout, live: live}
	observers = append(observers, view)
	cfg.Observer = observers

	opts := handler.Options{Environ: a.Environ}
	if cfg.Cartridge != simulateCartridge {
		dir, _ := filepath.Abs(filepath.Dir(cfg.File))
		backend := &handler.BotBackend{Host: a.host(), Cartridge: cfg.Cartridge, GraphDir: dir, Confirmer: a.pipelineConfirmer()}
		defer backend.Close()
		opts.Backend = backend
	}
	switch {
	case autoApprove:
		opts.Interviewer = handler.AutoApprove{}
	default:
		opts.Interviewer = &handler.Console{In: a.Stdin, Out: &pausing{view: view, w: a.Stdout}}
		if chatGates(cfg.Graph) {
			gate, err := a.pipelineGate(gatewayConfig, opts.Interviewer)
			if err != nil {
				return fmt.Errorf("the flow's gates ask in chats (human.channel): %w", err)
			}
			defer gate.Close()
			opts.Interviewer = gate
		}
	}
	cfg.Handlers = handler.NewRegistry(opts)

	ctx := a.context()
	if live {
		go view.tick(ctx)
	}
	fmt.Fprintf(a.Stdout, "run folder: %s\n", cfg.LogsRoot)
	res, err := run(ctx, cfg)
	view.stop()
	if err != nil {
		return err
	}
	total := res.Tokens
	switch {
	case res.AlreadyDone:
		fmt.Fprintf(a.Stdout, "the run in %s had already ended: %s\n", cfg.LogsRoot, res.Status)
		if res.Status != engine.Success {
			return &reportedError{"pipeline failed: " + res.FailureReason}
		}
		return nil
	case res.Lost:
		fmt.Fprintf(a.Stderr, "nb: pipeline stopped: %s\n", res.FailureReason)
		return &reportedError{"pipeline stopped: another process may have taken the run over"}
	case res.Interrupted:
		if cfg.Stored != nil {
			fmt.Fprintf(a.Stderr, "nb: pipeline stopped; its checkpoint is kept in the store: nb pipeline resume --store URL %s\n", cfg.Stored.Info().ID)
		} else {
			fmt.Fprintf(a.Stderr, "nb: pipeline stopped; its checkpoint is kept: nb pipeline resume %s\n", cfg.LogsRoot)
		}
		if cause := context.Cause(ctx); cause != nil {
			var se *signalError
			if errors.As(cause, &se) {
				return se
			}
		}
		return &reportedError{"pipeline interrupted"}
	case res.Status == engine.Success:
		fmt.Fprintf(a.Stdout, "pipeline succeeded in %s: %d stages, %s tokens (in %d, out %d)\n", res.Duration.Round(time.Millisecond), res.Steps, thousands(total.Total()), total.Input, total.Output)
		if !res.ReachedExit {
			fmt.Fprintf(a.Stderr, "nb: warning: the run ended at %s, short of the exit node: no edge from it could be taken; the specification counts it as a success\n", lastOf(res.CompletedNodes))
		}
		return nil
	}
	return &reportedError{fmt.Sprintf("pipeline failed: %s", res.FailureReason)}
}

func lastOf(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}

// pipelineConfirmer decides the tool calls of LLM stages that need a
// confirmation: --yes and --allow-tool approve them; otherwise a
// terminal asks.
func (a *App) pipelineConfirmer() agent.Confirmer {
	cart, err := a.loadCartridge("-")
	if err != nil {
		return nil
	}
	return &term.Confirmer{Printer: &term.Printer{W: a.Stderr, Err: a.Stderr, Cartridge: cart}, Stderr: a.Stderr, Approval: a.approve.Clone()}
}

// thousands writes n with thousands separators.
func thousands(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return s
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// pipelineView shows a run: on a terminal, a status line for the running
// stage (its elapsed time and tokens) and a line per finished stage
// (outcome, time, tokens, the edge taken); in a pipe, one plain line per
// event.
type pipelineView struct {
	w    io.Writer
	live bool

	mu      sync.Mutex
	stage   string
	began   time.Time
	tokens  engine.Tokens
	pending string // a finished stage's line, waiting for its edge
	status  bool   // a status line is on screen
	done    chan struct{}
	once    sync.Once
}

// OnEvent shows one event.
func (v *pipelineView) OnEvent(ev engine.Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.live {
		if ev.Kind != engine.StageProgress { // a running stage's token count: for the live display only
			fmt.Fprintln(v.w, plainEvent(ev))
		}
		return
	}
	if ev.Branch != "" && ev.Kind != engine.ParallelBranchStarted && ev.Kind != engine.ParallelBranchCompleted {
		if ev.Kind == engine.StageCompleted || ev.Kind == engine.StageFailed {
			v.clear()
			fmt.Fprintf(v.w, "  %s %s (branch of %s) %s %s\n", mark(ev.Status), ev.Name, ev.Branch, ev.Status, dur(ev.Duration))
		}
		return
	}
	switch ev.Kind {
	case engine.StageStarted:
		v.flush("")
		v.stage, v.began, v.tokens = ev.Name, ev.Time, engine.Tokens{}
		v.draw()
	case engine.StageProgress:
		if ev.Tokens != nil && ev.Name == v.stage {
			v.tokens = *ev.Tokens
			v.draw()
		}
	case engine.StageRetrying:
		v.clear()
		fmt.Fprintf(v.w, "  ↻ %s: retry %d in %s\n", ev.Name, ev.Attempt, dur(ev.Delay))
	case engine.StageCompleted, engine.StageFailed:
		v.clear()
		line := fmt.Sprintf("%s %-20s %-15s %8s", mark(ev.Status), ev.Name, ev.Status, dur(ev.Duration))
		if ev.Tokens != nil {
			line += fmt.Sprintf("  %s tokens", thousands(ev.Tokens.Total()))
		}
		if ev.Error != "" && ev.Kind == engine.StageFailed {
			if ev.WillRetry {
				fmt.Fprintf(v.w, "  ! %s: %s (will retry)\n", ev.Name, ev.Error)
				return
			}
			line += "  " + ev.Error
		}
		v.pending, v.stage = line, ""
	case engine.EdgeSelected:
		edge := "→ " + ev.To
		if ev.Label != "" {
			edge += " [" + ev.Label + "]"
		}
		v.flush(edge)
	case engine.ParallelStarted:
		v.flush("")
		fmt.Fprintf(v.w, "⇉ %s: %d branches\n", ev.Name, ev.BranchCount)
	case engine.ParallelCompleted:
		fmt.Fprintf(v.w, "⇇ %s: %d succeeded, %d failed in %s\n", ev.Name, ev.SuccessCount, ev.FailureCount, dur(ev.Duration))
	case engine.InterviewStarted, engine.InterviewTimeout:
		v.clear()
		if ev.Kind == engine.InterviewTimeout {
			fmt.Fprintf(v.w, "  ⌛ %s: no answer in time\n", ev.Stage)
		}
	case engine.PipelineCompleted, engine.PipelineFailed:
		v.flush("")
	case engine.PipelineWarning:
		v.flush("")
		fmt.Fprintf(v.w, "! %s\n", ev.Notes)
	}
}

func (v *pipelineView) flush(edge string) {
	if v.pending == "" {
		return
	}
	v.clear()
	fmt.Fprintln(v.w, strings.TrimRight(v.pending+"  "+edge, " "))
	v.pending = ""
}

func (v *pipelineView) draw() {
	if v.stage == "" {
		return
	}
	line := fmt.Sprintf("▶ %s  %s", v.stage, time.Since(v.began).Round(100*time.Millisecond))
	if t := v.tokens.Total(); t > 0 {
		line += fmt.Sprintf("  %s tokens", thousands(t))
	}
	fmt.Fprintf(v.w, "\r\x1b[K%s", line)
	v.status = true
}

func (v *pipelineView) clear() {
	if v.status {
		fmt.Fprint(v.w, "\r\x1b[K")
		v.status = false
	}
}

// tick redraws the status line (its elapsed time) until the run ends.
func (v *pipelineView) tick(ctx context.Context) {
	v.mu.Lock()
	v.done = make(chan struct{})
	done := v.done
	v.mu.Unlock()
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			v.mu.Lock()
			if v.stage != "" && v.status {
				v.draw()
			}
			v.mu.Unlock()
		case <-done:
			return
		case <-ctx.Done():
			return
		}
	}
}

func (v *pipelineView) stop() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.flush("")
	v.clear()
	if v.done != nil {
		v.once.Do(func() { close(v.done) })
	}
}

// pausing is the console interviewer's output: it clears the status line
// first and keeps it off while the question waits.
type pausing struct {
	view *pipelineView
	w    io.Writer
}

func (p *pausing) Write(b []byte) (int, error) {
	p.view.mu.Lock()
	defer p.view.mu.Unlock()
	p.view.flush("")
	p.view.clear()
	p.view.stage = ""
	return p.w.Write(b)
}

func mark(s engine.Status) string {
	switch s {
	case engine.Success:
		return "✓"
	case engine.PartialSuccess:
		return "◐"
	case engine.Skipped:
		return "-"
	}
	return "✗"
}

func dur(msec float64) string {
	d := time.Duration(msec * float64(time.Millisecond))
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	default:
		return d.Round(100 * time.Millisecond).String()
	}
}

// plainEvent is an event as one plain line: its kind, then its fields.
func plainEvent(ev engine.Event) string {
	var b strings.Builder
	b.WriteString(string(ev.Kind))
	add := func(k, v string) {
		if v != "" {
			fmt.Fprintf(&b, " %s=%s", k, quoteIfNeeded(v))
		}
	}
	add("name", ev.Name)
	if ev.Kind == engine.StageStarted || ev.Kind == engine.StageCompleted || ev.Kind == engine.StageFailed || ev.Kind == engine.StageRetrying {
		add("index", fmt.Sprint(ev.Index))
	}
	add("branch", ev.Branch)
	add("outcome", string(ev.Status))
	if ev.Duration > 0 {
		add("duration", dur(ev.Duration))
	}
	if ev.Attempt > 0 {
		add("attempt", fmt.Sprint(ev.Attempt))
		add("delay", dur(ev.Delay))
	}
	if ev.Kind == engine.StageFailed {
		add("will_retry", fmt.Sprint(ev.WillRetry))
	}
	add("error", ev.Error)
	if ev.Kind == engine.ParallelStarted {
		add("branch_count", fmt.Sprint(ev.BranchCount))
	}
	if ev.Kind == engine.ParallelCompleted {
		add("success_count", fmt.Sprint(ev.SuccessCount))
		add("failure_count", fmt.Sprint(ev.FailureCount))
	}
	if ev.Success != nil {
		add("success", fmt.Sprint(*ev.Success))
	}
	add("question", ev.Question)
	add("answer", ev.Answer)
	add("stage", ev.Stage)
	add("from", ev.From)
	add("to", ev.To)
	add("label", ev.Label)
	add("node_id", ev.NodeID)
	add("notes", ev.Notes)
	if ev.Tokens != nil && ev.Kind != engine.StageProgress {
		add("tokens", fmt.Sprint(ev.Tokens.Total()))
	}
	if ev.Kind == engine.PipelineStarted {
		add("id", ev.RunID)
	}
	return b.String()
}

func quoteIfNeeded(s string) string {
	if strings.ContainsAny(s, " \t\n\"=") {
		return fmt.Sprintf("%q", s)
	}
	return s
}

// logsAdvice words the engine's refusals of a run folder for nb pipeline,
// which names the folder with --logs.
func logsAdvice(res *engine.Result, err error) (*engine.Result, error) {
	var nc *engine.NoCheckpointError
	if errors.As(err, &nc) {
		return res, fmt.Errorf("%s: %w: is %s the folder of a run (its --logs)?", nc.Path, engine.ErrNoCheckpoint, nc.Dir)
	}
	var re *engine.RunExistsError
	if errors.As(err, &re) {
		return res, fmt.Errorf("%s already holds a run (checkpoint.json): continue it with nb pipeline resume %s, or choose another --logs folder", re.Dir, re.Dir)
	}
	return res, err
}
