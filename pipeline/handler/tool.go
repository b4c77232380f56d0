package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nbots/nb/pipeline/engine"
	"github.com/nbots/nb/proc"
)

// maxOutput bounds what a tool command's stdout and stderr keep each: a
// runaway command must not fill nb's memory.
const maxOutput = 16 << 20

// Tool is §4.10's handler: it runs tool_command with /bin/sh through
// nb's process rules (an allow-listed environment, its own process
// group, every process it started killed at its timeout or when the run
// is cancelled). Success sets tool.output to its raw stdout (D18: `echo
// yes` gives "yes\n"); a non-zero exit status fails the stage with
// "exit status N" (D18). tool_hooks.pre and .post run around it (§9.7).
type Tool struct {
	Environ []string
	Dir     string
}

// Execute runs the node's tool_command.
func (t *Tool) Execute(ctx context.Context, s *engine.Stage) (engine.Outcome, error) {
	command := s.Node.Str("tool_command", "")
	if strings.TrimSpace(command) == "" {
		return engine.Failf("No tool_command specified"), nil
	}
	hooks := hooksOf(s)
	info := hookCall{Node: s.Node.ID, Tool: "tool_command", Command: command}
	if skip, note := hooks.pre(ctx, s, t.Environ, t.Dir, info); skip {
		return engine.Outcome{Status: engine.Skipped, Notes: note}, nil
	}
	if timeout := s.Node.Timeout(); timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	stdout, stderr, code, err := runShell(ctx, command, t.Dir, proc.Env(t.Environ, nil, stageEnv(s)...), nil)
	info.ExitStatus, info.Output = &code, stdout
	defer hooks.post(context.WithoutCancel(ctx), s, t.Environ, t.Dir, info)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return engine.Failf("tool_command timed out after %s (the node's timeout): %s", s.Node.Timeout(), command), nil
		}
		if ctx.Err() != nil {
			return engine.Outcome{}, ctx.Err()
		}
		return engine.Failf("tool_command could not run: %v", err), nil
	}
	if code != 0 {
		reason := fmt.Sprintf("exit status %d", code)
		if msg := strings.TrimSpace(lastBytes(stderr, 500)); msg != "" {
			reason += ": " + msg
		}
		return engine.Outcome{Status: engine.Fail, FailureReason: reason, ContextUpdates: toolOutput(s, stdout)}, nil
	}
	return engine.Outcome{Status: engine.Success, Notes: "Tool completed: " + command,
		ContextUpdates: toolOutput(s, stdout)}, nil
}

// toolOutput is where a tool's stdout goes: the context's tool.output,
// whole up to engine.ArtifactThreshold (100 KB). A longer one does not
// belong in the context (§5.5: it is written with every checkpoint): it
// is stored whole as the artifact NODE.stdout, and tool.output keeps its
// last 100 KB (where builds and tests say what failed), with
// tool.output_artifact naming the artifact and tool.output_bytes its
// size.
func toolOutput(s *engine.Stage, stdout string) map[string]any {
	if len(stdout) <= engine.ArtifactThreshold {
		return map[string]any{"tool.output": stdout}
	}
	id := s.Node.ID + ".stdout"
	if _, err := s.Artifacts().Store(id, "stdout of "+s.Node.ID, stdout); err != nil {
		return map[string]any{"tool.output": stdout}
	}
	tail := stdout[len(stdout)-engine.ArtifactThreshold:]
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	return map[string]any{"tool.output": tail, "tool.output_artifact": id, "tool.output_bytes": len(stdout)}
}

// stageEnv are the variables a stage's commands get besides the
// allow-listed ones (D20): where the run and the stage folder are, so a
// command can write the stage's status.json (the status-file contract).
func stageEnv(s *engine.Stage) []string {
	return []string{"NB_PIPELINE_RUN_ID=" + s.RunID, "NB_PIPELINE_LOGS=" + s.LogsRoot, "NB_PIPELINE_STAGE_DIR=" + s.Dir, "NB_PIPELINE_NODE=" + s.Node.ID}
}

// runShell runs command with /bin/sh under nb's process rules; code is
// its exit status (-1 when it did not exit on its own).
func runShell(ctx context.Context, command, dir string, env []string, stdin []byte) (stdout, stderr string, code int, err error) {
	cmd := proc.Command(ctx, "/bin/sh", "-c", command)
	cmd.Env = append(cmd.Env, env...) // keep what proc.Command set (the sweep's marker)
	cmd.Dir = dir
	var out, errb capped
	out.max, errb.max = maxOutput, maxOutput
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	cmd.WaitDelay = proc.Grace
	err = cmd.Run()
	proc.Reap(cmd)
	var ee *exec.ExitError
	if errors.As(err, &ee) && ctx.Err() == nil {
		return out.String(), errb.String(), ee.ExitCode(), nil
	}
	if err != nil {
		return out.String(), errb.String(), -1, err
	}
	return out.String(), errb.String(), 0, nil
}

// capped keeps the first max bytes written to it.
type capped struct {
	bytes.Buffer
	max int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.max - c.Len(); room > 0 {
		c.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// hookCall is what a hook reads on its stdin, as JSON (D20).
type hookCall struct {
	Hook      string         `json:"hook"`
	Node      string         `json:"node"`
	Tool      string         `json:"tool"`
	Command   string         `json:"command,omitempty"`
	Arguments map[string]any `json:"arguments,omitempty"`
	// Output and ExitStatus are the post hook's.
	Output     string `json:"output,omitempty"`
	ExitStatus *int   `json:"exit_status,omitempty"`
	Error      string `json:"error,omitempty"`
}

// hooks are a stage's tool_hooks.pre and .post: the node's, else the
// graph's.
type hooks struct{ preCmd, postCmd string }

func hooksOf(s *engine.Stage) hooks {
	pick := func(key string) string {
		if v := s.Node.Str(key, ""); v != "" {
			return v
		}
		return s.Graph.Str(key, "")
	}
	return hooks{preCmd: pick("tool_hooks.pre"), postCmd: pick("tool_hooks.post")}
}

// hookTimeout bounds a hook: it runs around every tool call.
const hookTimeout = time.Minute

func (h hooks) run(ctx context.Context, s *engine.Stage, environ []string, dir, which, command string, call hookCall) (int, string, error) {
	call.Hook = which
	data, _ := json.Marshal(call)
	ctx, cancel := context.WithTimeout(ctx, hookTimeout)
	defer cancel()
	env := append(stageEnv(s), "NB_HOOK="+which, "NB_TOOL_NAME="+call.Tool)
	if call.ExitStatus != nil {
		env = append(env, fmt.Sprintf("NB_TOOL_EXIT_STATUS=%d", *call.ExitStatus))
	}
	_, stderr, code, err := runShell(ctx, command, dir, proc.Env(environ, nil, env...), data)
	return code, stderr, err
}

// pre runs the pre hook: a non-zero exit skips the tool call (§9.7),
// which is recorded in the run log.
func (h hooks) pre(ctx context.Context, s *engine.Stage, environ []string, dir string, call hookCall) (skip bool, note string) {
	if h.preCmd == "" {
		return false, ""
	}
	code, stderr, err := h.run(ctx, s, environ, dir, "pre", h.preCmd, call)
	if err == nil && code == 0 {
		return false, ""
	}
	note = fmt.Sprintf("tool_hooks.pre exited %d: tool call %s of node %s skipped", code, call.Tool, s.Node.ID)
	if err != nil {
		note = fmt.Sprintf("tool_hooks.pre failed (%v): tool call %s of node %s skipped", err, call.Tool, s.Node.ID)
	}
	if msg := strings.TrimSpace(lastBytes(stderr, 300)); msg != "" {
		note += ": " + msg
	}
	s.Context.AppendLog(note)
	return true, note
}

// post runs the post hook; its failure is only recorded (§9.7).
func (h hooks) post(ctx context.Context, s *engine.Stage, environ []string, dir string, call hookCall) {
	if h.postCmd == "" {
		return
	}
	code, _, err := h.run(ctx, s, environ, dir, "post", h.postCmd, call)
	if err != nil || code != 0 {
		s.Context.AppendLog(fmt.Sprintf("tool_hooks.post exited %d after tool call %s of node %s (%v)", code, call.Tool, s.Node.ID, err))
	}
}
