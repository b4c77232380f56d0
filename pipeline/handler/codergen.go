package handler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/nbots/nb/pipeline/engine"
)

// Backend runs an LLM stage (§4.5's CodergenBackend): the prompt (the
// preamble the stage's fidelity asks for, then the node's prompt) in,
// the model's answer, the outcome it reported (nb's outcome tool) and
// its tokens out.
type Backend interface {
	Run(ctx context.Context, s *engine.Stage, prompt string) (Reply, error)
}

// Reply is a Backend's answer.
type Reply struct {
	Text string
	// Outcome is what the model reported through the outcome tool (its
	// last call), nil when it did not call it.
	Outcome *engine.Outcome
	Tokens  engine.Tokens
}

// Codergen is §4.5's handler. The outcome is, in order: the one the
// model reported with the outcome tool; else a status.json the stage's
// tools wrote in its folder (the status-file contract); else, with
// auto_status, the synthesised auto-status success; else SUCCESS
// "Stage completed: <id>" (a backend that answered plain text).
type Codergen struct {
	// Backend nil answers "[Simulated] Response for stage: <id>".
	Backend Backend
	Environ []string
	Dir     string
}

// lastResponseChars is how much of a response last_response keeps (§4.5).
const lastResponseChars = 200

// Execute runs the node's prompt through the backend.
func (c *Codergen) Execute(ctx context.Context, s *engine.Stage) (engine.Outcome, error) {
	prompt := ExpandVars(s.Node.Prompt(), s.Graph.Goal(), s.Vars)
	if pre := s.Preamble(); pre != "" {
		prompt = pre + "\n" + prompt
	}
	// A status.json of an earlier visit must not pass for this one's.
	_ = os.Remove(filepath.Join(s.Dir, engine.StatusFile))
	if err := os.WriteFile(filepath.Join(s.Dir, "prompt.md"), []byte(prompt), 0o644); err != nil {
		return engine.Outcome{}, fmt.Errorf("write %s: %w", filepath.Join(s.Dir, "prompt.md"), err)
	}
	if timeout := s.Node.Timeout(); timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var reply Reply
	if c.Backend == nil {
		reply.Text = "[Simulated] Response for stage: " + s.Node.ID
	} else {
		var err error
		reply, err = c.Backend.Run(ctx, s, prompt)
		if err != nil {
			o := engine.Outcome{}
			if reply.Tokens != (engine.Tokens{}) {
				o.Tokens = &reply.Tokens
			}
			return o, err
		}
	}
	if err := os.WriteFile(filepath.Join(s.Dir, "response.md"), []byte(reply.Text), 0o644); err != nil {
		return engine.Outcome{}, fmt.Errorf("write %s: %w", filepath.Join(s.Dir, "response.md"), err)
	}
	updates := map[string]any{"last_stage": s.Node.ID, "last_response": truncate(reply.Text, lastResponseChars)}
	var o engine.Outcome
	switch written, err := engine.ReadStatus(s.Dir); {
	case reply.Outcome != nil:
		o = *reply.Outcome
	case err == nil:
		o = written
	case !errors.Is(err, engine.ErrNoStatus):
		o = engine.Failf("the stage's status.json cannot be used: %v", err)
	case s.Node.AutoStatus():
		o = engine.Outcome{Status: engine.Success, Notes: "auto-status: handler completed without writing status"}
	default:
		o = engine.Outcome{Status: engine.Success, Notes: "Stage completed: " + s.Node.ID}
	}
	for k, v := range o.ContextUpdates {
		updates[k] = v
	}
	o.ContextUpdates = updates
	if reply.Tokens != (engine.Tokens{}) {
		t := reply.Tokens
		o.Tokens = &t
	}
	return o, nil
}

// ExpandVars is §4.5's variable expansion: $goal is the graph's goal,
// and each --set variable $name its value (longest names first, so that
// $goal_file is not read as $goal followed by _file). It is plain string
// replacement, not a template language.
func ExpandVars(s, goal string, vars map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	names := make([]string, 0, len(vars)+1)
	for k := range vars {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return len(names[i]) > len(names[j]) })
	for _, k := range names {
		s = strings.ReplaceAll(s, "$"+k, vars[k])
	}
	if _, ok := vars["goal"]; !ok {
		s = strings.ReplaceAll(s, "$goal", goal)
	}
	return s
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n])
}
