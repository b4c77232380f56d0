package handler

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/goccy/go-yaml"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/pipeline/engine"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/tool"
)

// BotBackend runs each LLM stage as one exchange of an nb cartridge
// through the bot runtime, so the cartridge's tools, built-ins, MCP
// servers, safety and confirmations apply. The cartridge is the node's
// `cartridge` attribute, else the graph's, else Cartridge (--cartridge),
// else the default cartridge; the node's llm_model, llm_provider and
// reasoning_effort (set on it or by the stylesheet) override the
// cartridge's. Every stage is offered the outcome tool.
type BotBackend struct {
	Host bot.Host
	// Cartridge is --cartridge ("" is the default cartridge).
	Cartridge string
	// GraphDir is the flow file's folder: a relative cartridge path in
	// the graph is read from there first.
	GraphDir string
	// Confirmer decides the tool calls that need a confirmation; nil
	// denies them.
	Confirmer agent.Confirmer
	// OnEvent, when set, receives the exchanges' events.
	OnEvent func(s *engine.Stage, ev agent.Event)
	// Served, when set, resolves a stage's cartridge name to a cartridge
	// a server serves, and its bot (nb serve: the request's token must
	// be allowed it): no file is read. A node may then change the
	// cartridge's model and reasoning effort but not its provider, whose
	// credentials would be the server's.
	Served func(ctx context.Context, name string) (*cartridge.Cartridge, *bot.Bot, error)

	mu   sync.Mutex
	bots map[string]*bot.Bot
}

// Close stops what the backend's bots started (MCP servers).
func (b *BotBackend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, x := range b.bots {
		x.Close()
	}
	b.bots = nil
	return nil
}

// cartridgeName is the stage's cartridge (see BotBackend).
func (b *BotBackend) cartridgeName(s *engine.Stage) string {
	for _, v := range []string{s.Node.Str("cartridge", ""), s.Graph.Str("cartridge", ""), b.Cartridge} {
		if v != "" {
			return v
		}
	}
	return "-"
}

// botFor builds (once) the bot of a cartridge with a node's overrides.
func (b *BotBackend) botFor(ctx context.Context, s *engine.Stage) (*bot.Bot, error) {
	name := b.cartridgeName(s)
	model, prov := s.Node.LLMModel(), s.Node.LLMProvider()
	effort := ""
	if s.Node.Has("reasoning_effort") {
		effort = s.Node.ReasoningEffort()
	}
	var served *bot.Bot
	var c *cartridge.Cartridge
	if b.Served != nil {
		var err error
		if c, served, err = b.Served(ctx, name); err != nil {
			return nil, fmt.Errorf("node %s: cartridge %s: %w", s.Node.ID, name, err)
		}
		if prov != "" && prov != c.Provider().ID {
			return nil, fmt.Errorf("node %s: llm_provider %s: a served pipeline may not change its cartridge's provider (%s), whose credentials would be the server's: name a served cartridge of that provider (cartridge=ID)", s.Node.ID, prov, c.Provider().ID)
		}
		if model == "" && effort == "" {
			return served, nil // the catalog's bot, held by the run's request
		}
	}
	key := strings.Join([]string{name, model, prov, effort}, "\x00")
	b.mu.Lock()
	defer b.mu.Unlock()
	if x, ok := b.bots[key]; ok {
		return x, nil
	}
	if c == nil {
		var err error
		if c, err = b.load(name); err != nil {
			return nil, fmt.Errorf("node %s: cartridge %s: %w", s.Node.ID, name, err)
		}
	}
	if model != "" || prov != "" || effort != "" {
		var err error
		if c, err = override(c, model, prov, effort, b.Host.LookupEnv); err != nil {
			return nil, fmt.Errorf("node %s: %w", s.Node.ID, err)
		}
	}
	x, err := bot.New(ctx, c, b.Host)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", s.Node.ID, err)
	}
	if b.bots == nil {
		b.bots = map[string]*bot.Bot{}
	}
	b.bots[key] = x
	return x, nil
}

func (b *BotBackend) load(name string) (*cartridge.Cartridge, error) {
	if name != "-" && b.GraphDir != "" && !filepath.IsAbs(name) {
		p := filepath.Join(b.GraphDir, name)
		if _, err := os.Stat(p); err == nil {
			return cartridge.Load(p, b.Host.LookupEnv)
		}
	}
	return b.Host.Load(name)
}

// override returns c with the node's model, provider and reasoning
// effort. Another provider than the cartridge's takes its credentials
// from the variables the default cartridge uses for OpenAI
// (<PROVIDER>_API_ADDRESS and <PROVIDER>_API_KEY).
func override(c *cartridge.Cartridge, model, prov, effort string, env cartridge.Lookup) (*cartridge.Cartridge, error) {
	raw := cloneSlice(c.Raw)
	if prov != "" && prov != c.Provider().ID {
		up := strings.ToUpper(prov)
		raw = setPath(raw, []string{"provider", "id"}, prov)
		raw = setPath(raw, []string{"provider", "credentials"}, yaml.MapSlice{
			{Key: "address", Value: "ENV/" + up + "_API_ADDRESS"}, {Key: "access-token", Value: "ENV/" + up + "_API_KEY"}})
	}
	if model != "" {
		raw = setPath(raw, []string{"provider", "settings", "model"}, model)
	}
	if effort != "" {
		raw = setPath(raw, []string{"provider", "options", "reasoning-effort"}, effort)
	}
	src, err := yaml.MarshalWithOptions(raw)
	if err != nil {
		return nil, err
	}
	out, err := cartridge.Parse(src, c.Path, cartridge.FormatYAML, env)
	if err != nil {
		return nil, fmt.Errorf("llm_model/llm_provider/reasoning_effort over cartridge %s: %w", bot.DisplayPath(c), err)
	}
	return out, nil
}

func cloneSlice(ms yaml.MapSlice) yaml.MapSlice {
	out := make(yaml.MapSlice, len(ms))
	for i, it := range ms {
		if sub, ok := it.Value.(yaml.MapSlice); ok {
			it.Value = cloneSlice(sub)
		}
		out[i] = it
	}
	return out
}

func setPath(ms yaml.MapSlice, path []string, v any) yaml.MapSlice {
	for i, it := range ms {
		if fmt.Sprint(it.Key) != path[0] {
			continue
		}
		if len(path) == 1 {
			ms[i].Value = v
			return ms
		}
		sub, _ := it.Value.(yaml.MapSlice)
		ms[i].Value = setPath(sub, path[1:], v)
		return ms
	}
	if len(path) == 1 {
		return append(ms, yaml.MapItem{Key: path[0], Value: v})
	}
	return append(ms, yaml.MapItem{Key: path[0], Value: setPath(nil, path[1:], v)})
}

// Run runs one exchange: at `full` fidelity on the thread's
// conversation (kept for the run), otherwise on a fresh one.
func (b *BotBackend) Run(ctx context.Context, s *engine.Stage, prompt string) (Reply, error) {
	x, err := b.botFor(ctx, s)
	if err != nil {
		return Reply{}, err
	}
	var conv agent.Conversation
	if s.Fidelity == "full" {
		conv = s.Session("thread:"+s.Thread, func() any { return agent.NewMemory() }).(*agent.Memory)
	} else {
		conv = agent.NewMemory()
	}
	out := &OutcomeTool{}
	var tokens engine.Tokens
	ex := bot.Exchange{Mode: cartridge.Eval, Conversation: conv, Confirmer: b.Confirmer, Tools: []tool.Tool{out},
		OnEvent: func(ev agent.Event) {
			if ev.Kind == agent.RoundEnd {
				tokens.Add(tokensOf(ev.Usage))
				s.Progress(tokens)
			}
			if b.OnEvent != nil {
				b.OnEvent(s, ev)
			}
		}}
	if h := hooksOf(s); h.preCmd != "" || h.postCmd != "" {
		ex.ToolFilter = func(tool.Tool) bool { return false }
		ex.Tools = nil
		for _, t := range x.Tools().Tools() {
			ex.Tools = append(ex.Tools, &hookedTool{Tool: t, hooks: h, stage: s, environ: b.Host.Environ})
		}
		ex.Tools = append(ex.Tools, out) // the outcome tool is nb's own, not a tool call hooks watch
	}
	res, err := x.Ask(ctx, ex, prompt)
	reply := Reply{Tokens: tokens, Outcome: out.Last()}
	if res != nil {
		reply.Text = res.Text
		if res.Text == "" && res.Notice != "" {
			reply.Text = res.Notice
		}
		reply.Tokens = tokensOf(res.Usage)
	}
	return reply, err
}

func tokensOf(u provider.Usage) engine.Tokens {
	return engine.Tokens{Input: u.InputTokens, Output: u.OutputTokens, CacheRead: u.CacheReadTokens, CacheWrite: u.CacheWriteTokens, Reasoning: u.ReasoningTokens}
}

// hookedTool runs tool_hooks.pre and .post around a cartridge tool's
// calls (§9.7): a pre hook's non-zero exit skips the call (the model is
// told), a post hook's failure is recorded in the run log.
type hookedTool struct {
	tool.Tool
	hooks   hooks
	stage   *engine.Stage
	environ []string
}

// ReadOnly keeps the wrapped tool's answer: a hook changes nothing about
// whether a call needs a confirmation.
func (h *hookedTool) ReadOnly() bool {
	r, ok := h.Tool.(tool.ReadOnly)
	return ok && r.ReadOnly()
}

func (h *hookedTool) Run(ctx context.Context, call tool.Call) (any, error) {
	info := hookCall{Node: h.stage.Node.ID, Tool: call.Name, Arguments: call.Arguments}
	if skip, note := h.hooks.pre(ctx, h.stage, h.environ, "", info); skip {
		return nil, fmt.Errorf("%s", note)
	}
	out, err := h.Tool.Run(ctx, call)
	if data, e := json.Marshal(out); e == nil {
		info.Output = string(data)
	}
	if err != nil {
		info.Error = err.Error()
	}
	h.hooks.post(context.WithoutCancel(ctx), h.stage, h.environ, "", info)
	return out, err
}

// OutcomeTool is the tool every LLM stage is offered: the model reports
// the stage's outcome with it (status, preferred_label,
// suggested_next_ids, context_updates, notes, failure_reason); its last
// call wins.
type OutcomeTool struct {
	mu   sync.Mutex
	last *engine.Outcome
}

// Last is the outcome of the last valid call, nil when none.
func (t *OutcomeTool) Last() *engine.Outcome {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last
}

// ReadOnly says the tool changes nothing on the machine (it records what
// the model reports), so it never asks for a confirmation.
func (t *OutcomeTool) ReadOnly() bool { return true }

// Spec describes the tool to the model.
func (t *OutcomeTool) Spec() tool.Spec {
	str := map[string]any{"type": "string"}
	return tool.Spec{Name: "outcome", Description: "Report this pipeline stage's outcome once your work is done (the last call counts). Without a call the stage succeeds.",
		Parameters: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"status":             map[string]any{"type": "string", "enum": []string{"success", "partial_success", "retry", "fail"}, "description": "success, partial_success (done with caveats), retry (run this stage again), fail"},
				"preferred_label":    map[string]any{"type": "string", "description": "the label of the outgoing edge to follow"},
				"suggested_next_ids": map[string]any{"type": "array", "items": str, "description": "node ids to go to next, in order of preference"},
				"context_updates":    map[string]any{"type": "object", "description": "key-value pairs for the pipeline's context (later stages and edge conditions read them)"},
				"notes":              map[string]any{"type": "string"},
				"failure_reason":     map[string]any{"type": "string", "description": "why the stage failed or needs a retry"},
			},
			"required": []string{"status"},
		}}
}

// Run records the call.
func (t *OutcomeTool) Run(_ context.Context, call tool.Call) (any, error) {
	data, err := json.Marshal(call.Arguments)
	if err != nil {
		return nil, err
	}
	var a struct {
		Status           string         `json:"status"`
		PreferredLabel   string         `json:"preferred_label"`
		SuggestedNextIDs []string       `json:"suggested_next_ids"`
		ContextUpdates   map[string]any `json:"context_updates"`
		Notes            string         `json:"notes"`
		FailureReason    string         `json:"failure_reason"`
	}
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("outcome: %v: status is a string, suggested_next_ids a list of strings, context_updates an object", err)
	}
	st, err := engine.ParseStatus(a.Status)
	if err != nil || st == engine.Skipped {
		return nil, fmt.Errorf("outcome: status %q: use success, partial_success, retry or fail", a.Status)
	}
	o := &engine.Outcome{Status: st, PreferredLabel: a.PreferredLabel, SuggestedNextIDs: a.SuggestedNextIDs,
		ContextUpdates: a.ContextUpdates, Notes: a.Notes, FailureReason: a.FailureReason}
	t.mu.Lock()
	t.last = o
	t.mu.Unlock()
	return "recorded: " + string(st), nil
}
