package cron

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/tool"
)

// Tool is nanobot's cron tool for one turn: the agent adds, lists and
// removes jobs that answer in the chat of the turn.
type Tool struct {
	Store *Store
	// Zone is agents.defaults.timezone (nil: UTC), for cron expressions
	// without tz and "at" times without an offset.
	Zone *time.Location
	// Channel and ChatID are the turn's chat, where added jobs deliver.
	Channel, ChatID string
	// InCronJob is set in the turns of cron jobs, which may not schedule.
	InCronJob bool
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Spec is nanobot's.
func (t *Tool) Spec() tool.Spec {
	return tool.Spec{
		Name:        "cron",
		Description: "Schedule reminders and recurring tasks. Actions: add, list, remove.",
		Parameters:  cronParams(),
	}
}

// cronParams is cron's schema, built once on first use: a spec's Parameters are read-only
// (tool.Spec), and a turn asks every tool for its spec.
var cronParams = sync.OnceValue(func() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"action":        map[string]any{"type": "string", "enum": []any{"add", "list", "remove"}, "description": "Action to perform"},
			"message":       map[string]any{"type": "string", "description": "Reminder message (for add)"},
			"every_seconds": map[string]any{"type": "integer", "description": "Interval in seconds (for recurring tasks)"},
			"cron_expr":     map[string]any{"type": "string", "description": "Cron expression like '0 9 * * *' (for scheduled tasks)"},
			"tz":            map[string]any{"type": "string", "description": "IANA timezone for cron expressions (e.g. 'America/Vancouver')"},
			"at":            map[string]any{"type": "string", "description": "ISO datetime for one-time execution (e.g. '2026-02-12T10:30:00')"},
			"job_id":        map[string]any{"type": "string", "description": "Job ID (for remove)"},
		},
		"required": []any{"action"},
	}
})

// Run runs one action; mistakes are answered as nanobot answers them
// ("Error: …"), for the model to correct.
func (t *Tool) Run(ctx context.Context, call tool.Call) (any, error) {
	str := func(k string) string { s, _ := call.Arguments[k].(string); return strings.TrimSpace(s) }
	switch str("action") {
	case "add":
		return t.add(ctx, call.Arguments, str), nil
	case "list":
		return t.list()
	case "remove":
		id := str("job_id")
		if id == "" {
			return "Error: job_id is required for remove", nil
		}
		found := false
		err := t.Store.Edit(ctx, func(f *File) error {
			if i := f.Find(id); i >= 0 {
				f.Jobs = append(f.Jobs[:i], f.Jobs[i+1:]...)
				found = true
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if !found {
			return "Job " + id + " not found", nil
		}
		return "Removed job " + id, nil
	}
	return fmt.Sprintf("Unknown action: %s", str("action")), nil
}

func (t *Tool) add(ctx context.Context, args map[string]any, str func(string) string) string {
	if t.InCronJob {
		return "Error: cannot schedule new jobs from within a cron job execution"
	}
	msg := str("message")
	if msg == "" {
		return "Error: message is required for add"
	}
	if t.Channel == "" || t.ChatID == "" {
		return "Error: no session context (channel/chat_id)"
	}
	tz := str("tz")
	if tz != "" && str("cron_expr") == "" {
		return "Error: tz can only be used with cron_expr"
	}
	if tz != "" {
		if _, err := loadZone(tz); err != nil {
			return "Error: unknown timezone '" + tz + "'"
		}
	}
	now := t.now()
	name := []rune(msg)
	if len(name) > 30 {
		name = name[:30]
	}
	spec := Spec{Name: string(name), Message: msg, Deliver: true, Channel: t.Channel, To: t.ChatID}
	every, isNum := args["every_seconds"].(float64)
	switch {
	case isNum && every > 0:
		spec.Every = time.Duration(every * float64(time.Second))
	case str("cron_expr") != "":
		spec.Cron, spec.TZ = str("cron_expr"), tz
	case str("at") != "":
		at, err := parseISO(str("at"), t.zone())
		if err != nil {
			return "Error: " + err.Error()
		}
		spec.At = at
	default:
		return "Error: either every_seconds, cron_expr, or at is required"
	}
	job, err := NewJob(spec, now, t.zone())
	if err != nil {
		return "Error: " + err.Error()
	}
	if err := t.Store.Add(ctx, job); err != nil {
		return "Error: " + err.Error()
	}
	return fmt.Sprintf("Created job '%s' (id: %s)", job.Name, job.ID)
}

func (t *Tool) list() (any, error) {
	f, err := t.Store.Load()
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	for _, j := range f.Jobs {
		if !j.Enabled {
			continue
		}
		fmt.Fprintf(&b, "\n- %s (id: %s, %s)", j.Name, j.ID, j.Schedule.Describe(t.zone()))
	}
	if b.Len() == 0 {
		return "No scheduled jobs.", nil
	}
	return "Scheduled jobs:" + b.String(), nil
}

// ParseISO reads an ISO time as Python's datetime.fromisoformat does for
// nanobot: with an offset, or a wall-clock time in zone.
func ParseISO(s string, zone *time.Location) (time.Time, error) { return parseISO(s, zone) }

func parseISO(s string, zone *time.Location) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if zone == nil {
		zone = time.UTC
	}
	for _, layout := range []string{"2006-01-02T15:04:05.999999", "2006-01-02T15:04", "2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, zone); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not an ISO time (like 2026-03-15T09:00 or 2026-03-15T09:00:00+01:00)", s)
}

func (t *Tool) zone() *time.Location {
	if t.Zone == nil {
		return time.UTC
	}
	return t.Zone
}

func (t *Tool) now() time.Time {
	if t.Now == nil {
		return time.Now()
	}
	return t.Now()
}
