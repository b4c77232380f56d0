// Package heartbeat wakes the assistant every gateway.heartbeat.intervalS
// to work on the unchecked tasks of the workspace's HEARTBEAT.md, as
// nanobot does, without its idle cost: a file that is absent, empty, the
// untouched template or without an unchecked task costs no model call at
// all (found by reading the file). When tasks are left, the model is
// asked first, as nanobot asks it, whether to run them now (Decide: the
// heartbeat tool's skip or run), and only a run becomes a turn; a beat's
// prompt is the tasks alone (at most MaxPromptTokens), run in a session
// of its own, never a replay of a chat.
package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/gateway/modelcall"
	"github.com/nbots/nb/gateway/replica"
	"github.com/nbots/nb/internal/metric"
	"github.com/nbots/nb/tool"
)

// Template is nanobot's HEARTBEAT.md template: a file equal to it has no
// task.
const Template = `# Heartbeat Tasks

This file is checked every 30 minutes by your nanobot agent.
Add tasks below that you want the agent to work on periodically.

If this file has no tasks (only headers and comments), the agent will skip the heartbeat.

## Active Tasks

<!-- Add your periodic tasks below this line -->


## Completed

<!-- Move completed tasks here or delete them -->

`

// Session is the key of the heartbeat's own session.
const Session = "heartbeat"

// MaxPromptTokens bounds the prompt of a beat (the tasks and the words
// around them), estimated generously (a token per 3 bytes).
const MaxPromptTokens = 3000

// DefaultInterval is nanobot's gateway.heartbeat.intervalS (1,800 s).
const DefaultInterval = 30 * time.Minute

// Service runs the beats of one workspace.
type Service struct {
	// Workspace holds HEARTBEAT.md.
	Workspace string
	// Interval between beats (default 30 minutes).
	Interval time.Duration
	// Execute runs a beat's prompt as an agent turn in the isolated
	// session Session and delivers its answer as nanobot does (to the most
	// recently active chat). It is the only way a beat reaches a model.
	Execute func(ctx context.Context, prompt string) error
	// Zone is the zone of the time in the prompt (agents.defaults.timezone).
	Zone *time.Location
	// Log receives warnings; nil discards them.
	Log *slog.Logger
	// Claims is asked before each beat (key "heartbeat.<start of the
	// interval>"): replicas beat once per interval between them. A
	// heartbeat alone takes replica.Local.
	Claims replica.Claims
	// Decide, when set, is asked before a beat with unchecked tasks runs
	// them, as nanobot's phase 1 asks: offered the heartbeat tool, the
	// model answers skip (nothing to do now: no turn, no message) or run
	// with a summary of the tasks, which the turn is then given. Nil runs
	// every beat that has unchecked tasks.
	Decide modelcall.Caller
}

// DecisionTool is nanobot's heartbeat tool.
var DecisionTool = tool.Spec{
	Name:        "heartbeat",
	Description: "Report heartbeat decision after reviewing tasks.",
	Parameters: map[string]any{
		"type": "object",
		"properties": map[string]any{
			"action": map[string]any{
				"type":        "string",
				"enum":        []any{"skip", "run"},
				"description": "skip = nothing to do, run = has active tasks",
			},
			"tasks": map[string]any{
				"type":        "string",
				"description": "Natural-language summary of active tasks (required for run)",
			},
		},
		"required": []any{"action"},
	},
}

// decide is nanobot's phase 1 on the tasks left: run or not, and the
// tasks to run as the model sums them up ("" keeps them as they are).
func (s *Service) decide(ctx context.Context, tasks string, now time.Time) (bool, string, error) {
	reply, err := s.Decide.Call(ctx, modelcall.Request{
		Source:  "heartbeat",
		Session: Session,
		System:  "You are a heartbeat agent. Call the heartbeat tool to report your decision.",
		User: "Current Time: " + clock(now) + "\n\n" +
			"Review the following HEARTBEAT.md and decide whether there are active tasks.\n\n" + tasks,
		Tools: []tool.Spec{DecisionTool},
	})
	if err != nil {
		return false, "", fmt.Errorf("decision: %w", err)
	}
	var args struct {
		Action string `json:"action"`
		Tasks  any    `json:"tasks"`
	}
	// nanobot: no call, or arguments that cannot be read, is a skip
	if reply.Args(DecisionTool.Name, &args) != nil || args.Action != "run" {
		return false, "", nil
	}
	summary, _ := args.Tasks.(string)
	return true, strings.TrimSpace(summary), nil
}

// clock is the time as nanobot's current_time_str writes it:
// "2026-03-15 22:30 (Saturday) (CET)".
func clock(now time.Time) string {
	return fmt.Sprintf("%s (%s) (%s)", now.Format("2006-01-02 15:04"), now.Format("Monday"), now.Format("MST"))
}

// Run beats every Interval until ctx ends.
func (s *Service) Run(ctx context.Context) error {
	interval := s.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
		ok, err := s.Claims.Claim(ctx, replica.Slot("heartbeat", time.Now(), interval))
		if err != nil && ctx.Err() == nil {
			s.logger().Warn("heartbeat: not beating: " + err.Error())
		}
		if !ok {
			continue
		}
		ran, err := s.Beat(ctx)
		if err != nil && ctx.Err() == nil {
			s.logger().Warn("heartbeat: " + err.Error())
		}
		switch {
		case ran:
			metric.Beat("called")
		case err != nil:
			metric.Beat("failed")
		default:
			metric.Beat("skipped")
		}
	}
}

// Beat reads HEARTBEAT.md and, when it has unchecked tasks, executes them;
// it reports whether it did.
func (s *Service) Beat(ctx context.Context) (bool, error) {
	path := filepath.Join(s.Workspace, "HEARTBEAT.md")
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s: %w", path, err)
	}
	now := time.Now().In(s.zone())
	prompt, ok := Prompt(string(data), now)
	if !ok {
		return false, nil
	}
	if s.Decide != nil {
		run, summary, err := s.decide(ctx, prompt[len(head(now)):], now)
		if err != nil {
			return false, err
		}
		if !run {
			s.logger().Info("heartbeat: OK (nothing to report)")
			return false, nil
		}
		if summary != "" {
			prompt = head(now) + summary
		}
	}
	if err := s.Execute(ctx, prompt); err != nil {
		return true, fmt.Errorf("beat: %w", err)
	}
	return true, nil
}

// Prompt is the prompt of a beat for the content of HEARTBEAT.md at now;
// false when the file has no unchecked task.
func Prompt(content string, now time.Time) (string, bool) {
	tasks := Tasks(content)
	if tasks == "" {
		return "", false
	}
	head := head(now)
	budget := MaxPromptTokens*3 - len(head) - 100
	if len(tasks) > budget {
		cut := strings.LastIndexByte(tasks[:budget], '\n')
		if cut < 0 {
			cut = budget
		}
		rest := strings.Count(tasks[cut:], "\n") + 1
		tasks = validUTF8Prefix(tasks[:cut]) + fmt.Sprintf("\n(%d more lines: read HEARTBEAT.md)", rest)
	}
	return head + tasks, true
}

// head is the words of a beat's prompt before its tasks.
func head(now time.Time) string {
	return fmt.Sprintf("[Heartbeat] Current Time: %s (%s) (%s)\nThese are the unchecked tasks of HEARTBEAT.md in your workspace. Work on them now. If nothing needs the user's attention, answer in one short sentence.\n\n",
		now.Format("2006-01-02 15:04"), now.Format("Monday"), now.Location())
}

// EstimateTokens is a generous estimate of the tokens of s: one per 3
// bytes (English runs at about 4 characters a token; CJK at one a
// character, 3 bytes).
func EstimateTokens(s string) int { return (len(s) + 2) / 3 }

var (
	comment  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?s)<!--.*?-->`) })
	listItem = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(\s*)(?:[-*+]|\d+[.)])\s+(\[[ xX]\]\s*)?`) })
)

// Tasks is what is left to do in a HEARTBEAT.md: its sections (after a
// "## " heading; the whole file when it has none) but "Completed" ones,
// without comments, checked items ("- [x] …" and the lines indented under
// them) or headings; "" when nothing is left, as in the template.
func Tasks(content string) string {
	content = comment().ReplaceAllString(strings.ReplaceAll(content, "\r\n", "\n"), "")
	lines := strings.Split(content, "\n")
	sectioned := false
	for _, l := range lines {
		if strings.HasPrefix(l, "## ") {
			sectioned = true
			break
		}
	}
	var out []string
	active := !sectioned
	skipIndent := -1 // skipping the lines under a checked item indented more than this
	hasTask := false
	for _, l := range lines {
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(l, "# ") && !strings.HasPrefix(l, "## ") {
			continue // the title
		}
		if strings.HasPrefix(l, "## ") {
			title := strings.ToLower(strings.TrimSpace(strings.TrimPrefix(l, "## ")))
			active = !strings.HasPrefix(title, "completed") && !strings.HasPrefix(title, "done")
			skipIndent = -1
			if active {
				out = append(out, l)
			}
			continue
		}
		if !active {
			continue
		}
		indent := len(l) - len(strings.TrimLeft(l, " \t"))
		if skipIndent >= 0 {
			if trimmed == "" || indent > skipIndent {
				continue
			}
			skipIndent = -1
		}
		if m := listItem().FindStringSubmatch(l); m != nil {
			if box := strings.TrimSpace(m[2]); box == "[x]" || box == "[X]" {
				skipIndent = indent
				continue
			}
			if strings.TrimSpace(l[len(m[0]):]) != "" {
				hasTask = true
			}
		} else if trimmed != "" && !strings.HasPrefix(trimmed, "#") {
			hasTask = true
		}
		out = append(out, l)
	}
	if !hasTask {
		return ""
	}
	return strings.TrimSpace(collapseBlank(out))
}

// collapseBlank joins lines, keeping at most one blank line in a row and
// dropping headings left with nothing under them.
func collapseBlank(lines []string) string {
	var b strings.Builder
	blank := false
	for i, l := range lines {
		if lv := level(l); lv > 0 && emptyUntilHeading(lv, lines[i+1:]) {
			continue
		}
		if strings.TrimSpace(l) == "" {
			if blank {
				continue
			}
			blank = true
		} else {
			blank = false
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// emptyUntilHeading says whether nothing but blank lines come before the
// next heading of level lv or above (or the end).
func emptyUntilHeading(lv int, rest []string) bool {
	for _, l := range rest {
		if n := level(l); n > 0 && n <= lv {
			return true
		}
		if strings.TrimSpace(l) != "" {
			return false
		}
	}
	return true
}

// level is the level of a Markdown heading line, 0 for other lines.
func level(l string) int {
	t := strings.TrimSpace(l)
	n := len(t) - len(strings.TrimLeft(t, "#"))
	if n == 0 || n > 6 || (len(t) > n && t[n] != ' ') {
		return 0
	}
	return n
}

func validUTF8Prefix(s string) string { return strings.ToValidUTF8(s, "") }

func (s *Service) zone() *time.Location {
	if s.Zone == nil {
		return time.UTC
	}
	return s.Zone
}

func (s *Service) logger() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}
