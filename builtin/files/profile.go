package files

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/nbots/nb/builtin/internal/arg"
	"github.com/nbots/nb/tool"
)

// Profile is the shape of the file-editing tools: each model family gets
// the tool it was trained on (builtins.files.profile; auto picks by the
// cartridge's provider and model).
type Profile string

// Profiles.
const (
	// ProfileAuto picks one of the others by provider and model (ProfileFor).
	ProfileAuto Profile = "auto"
	// ProfileOpenAI edits with apply_patch, in the v4a patch format.
	ProfileOpenAI Profile = "openai"
	// ProfileAnthropic edits with edit_file(path, old_string, new_string,
	// replace_all).
	ProfileAnthropic Profile = "anthropic"
	// ProfileGemini edits with replace(path, old_string, new_string,
	// expected_replacements), gemini-cli's shape.
	ProfileGemini Profile = "gemini"
	// ProfileNanobot edits with edit_file(path, old_text, new_text,
	// replace_all): nanobot's shape, and nb's for other models.
	ProfileNanobot Profile = "nanobot"
)

// Profiles are the names builtins.files.profile takes.
var Profiles = []Profile{ProfileAuto, ProfileOpenAI, ProfileAnthropic, ProfileGemini, ProfileNanobot}

// ProfileFor is the profile auto picks: OpenAI's models (gpt-*, o1, o3,
// o4..., codex) on the openai provider get apply_patch, Anthropic's get
// edit_file with old_string, Gemini's replace, and every other model
// (compatible servers' open models, Ollama, Mistral, Cohere) nanobot's
// edit_file.
func ProfileFor(providerID, model string) Profile {
	m := strings.ToLower(model)
	if i := strings.LastIndex(m, "/"); i >= 0 {
		m = m[i+1:] // openai/gpt-5 on a router
	}
	switch {
	case providerID == "anthropic" || strings.HasPrefix(m, "claude"):
		return ProfileAnthropic
	case providerID == "google" || strings.HasPrefix(m, "gemini"):
		return ProfileGemini
	case strings.HasPrefix(m, "gpt-") || strings.HasPrefix(m, "codex") || strings.Contains(m, "-codex") ||
		(len(m) >= 2 && m[0] == 'o' && m[1] >= '1' && m[1] <= '9'):
		return ProfileOpenAI
	}
	return ProfileNanobot
}

// ShellTimeout is the exec tool's default time limit for a profile where
// the agent-loop reference gives one: 10 s for OpenAI's models, 120 s for
// Anthropic's; 0 keeps nb's default.
func (p Profile) ShellTimeout() int {
	switch p {
	case ProfileOpenAI:
		return 10
	case ProfileAnthropic:
		return 120
	}
	return 0
}

// EditTool is the profile's tool for changing part of a file.
func (p Profile) EditTool(w *Workspace) tool.Tool {
	if p == ProfileOpenAI {
		return ApplyPatch(w)
	}
	shape, ok := editShapes[p]
	if !ok {
		shape = editShapes[ProfileNanobot]
	}
	return &editTool{w: w, shape: shape}
}

// editShape names an edit tool and its arguments.
type editShape struct {
	name, old, new string
	// all is the replace-every-occurrence flag's name; count the
	// expected number of replacements' (one of the two is set).
	all, count string
}

var editShapes = map[Profile]editShape{
	ProfileNanobot:   {name: "edit_file", old: "old_text", new: "new_text", all: "replace_all"},
	ProfileAnthropic: {name: "edit_file", old: "old_string", new: "new_string", all: "replace_all"},
	ProfileGemini:    {name: "replace", old: "old_string", new: "new_string", count: "expected_replacements"},
}

// editTool replaces exact text in a file, in one of the shapes.
type editTool struct {
	w     *Workspace
	shape editShape
}

// editSpecs are the edit tools' specs, one per shape, each built once:
// a spec's Parameters are read-only (tool.Spec), and a turn asks every
// tool for its spec.
var editSpecs sync.Map // editShape -> tool.Spec

func (t *editTool) Spec() tool.Spec {
	if sp, ok := editSpecs.Load(t.shape); ok {
		return sp.(tool.Spec)
	}
	sp, _ := editSpecs.LoadOrStore(t.shape, editSpec(t.shape))
	return sp.(tool.Spec)
}

// editSpec is the spec of the edit tool of shape s.
func editSpec(s editShape) tool.Spec {
	props := map[string]any{
		"path": map[string]any{"type": "string", "description": "The file's path, relative to the workspace."},
		s.old:  map[string]any{"type": "string", "description": "The exact text to replace."},
		s.new:  map[string]any{"type": "string", "description": "The text to put in its place."},
	}
	how := "and occur exactly once, unless " + s.all + " is true"
	if s.all != "" {
		props[s.all] = map[string]any{"type": "boolean", "description": "Replace every occurrence instead of exactly one (default false)."}
	} else {
		how = "and occur exactly " + s.count + " times (1 when not given)"
		props[s.count] = map[string]any{"type": "integer", "minimum": 1, "description": "How many occurrences to replace; the edit fails when the file has a different number (default 1)."}
	}
	return tool.Spec{
		Name: s.name,
		Description: "Replace text in a file of the workspace. " + s.old + " must match the file exactly (whitespace and indentation included) " +
			how + "; include enough surrounding lines to make it unique. " +
			"Copy the text from read_file's answer without the \"N| \" line numbers.",
		Parameters: map[string]any{"type": "object", "properties": props, "required": []any{"path", s.old, s.new}},
	}
}

// OutputLimits: the attractor's 10,000 characters, tail kept.
func (t *editTool) OutputLimits() tool.Limits { return tool.Limits{Chars: 10_000, Tail: true} }

func (t *editTool) Run(ctx context.Context, call tool.Call) (any, error) {
	s := t.shape
	p, err := arg.String(call.Arguments, "path", true)
	if err != nil {
		return nil, err
	}
	oldText, err := arg.String(call.Arguments, s.old, true)
	if err != nil {
		return nil, err
	}
	newText, err := arg.String(call.Arguments, s.new, true)
	if err != nil {
		return nil, err
	}
	all, expected := false, 0
	if s.all != "" {
		if all, err = arg.Bool(call.Arguments, s.all, false); err != nil {
			return nil, err
		}
	} else {
		if expected, err = arg.Int(call.Arguments, s.count, 1, 1, 1<<30); err != nil {
			return nil, err
		}
	}
	out, err := t.w.in(ctx).replace(p, oldText, newText, all, expected, s)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// String names the profile's edit tool, for status lines.
func (p Profile) String() string {
	if p == ProfileOpenAI {
		return fmt.Sprintf("%s (apply_patch)", string(p))
	}
	if s, ok := editShapes[p]; ok {
		return fmt.Sprintf("%s (%s with %s)", string(p), s.name, s.old)
	}
	return string(p)
}
