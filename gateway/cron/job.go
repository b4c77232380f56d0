// Package cron keeps the gateway's scheduled jobs: nanobot's cron/jobs.json
// (its format, unchanged) and a scheduler that runs each due job exactly
// once per slot, in the job's IANA zone, across daylight-saving changes,
// restarts and edits made by other processes (`nb gateway cron add` while
// the gateway runs). What a run does is the caller's: a func given to the
// Scheduler. Nothing here knows chat platforms or models.
package cron

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/adhocore/gronx"
)

// Schedule kinds, as nanobot names them.
const (
	KindAt    = "at"
	KindEvery = "every"
	KindCron  = "cron"
)

// File is the content of cron/jobs.json.
type File struct {
	Version int   `json:"version"`
	Jobs    []Job `json:"jobs"`
}

// Job is one scheduled job in nanobot's format (camelCase keys, nulls
// written as nanobot writes them).
type Job struct {
	ID             string   `json:"id"`
	Name           string   `json:"name"`
	Enabled        bool     `json:"enabled"`
	Schedule       Schedule `json:"schedule"`
	Payload        Payload  `json:"payload"`
	State          State    `json:"state"`
	CreatedAtMs    int64    `json:"createdAtMs"`
	UpdatedAtMs    int64    `json:"updatedAtMs"`
	DeleteAfterRun bool     `json:"deleteAfterRun"`
	// RunNow asks the scheduler to run the job at its next pass, even when
	// disabled, without changing its schedule (`nb gateway cron run`). An nb
	// extension that nanobot ignores.
	RunNow bool `json:"runNow,omitempty"`
	// CatchUp runs the job once when the gateway starts after it missed
	// runs while stopped. Without it, missed runs are skipped and the
	// next is counted from the start, as nanobot does. An nb extension
	// that nanobot ignores (and drops when it rewrites the file).
	CatchUp bool `json:"catchUp,omitempty"`
}

// Schedule says when a job runs: once at AtMs, every EveryMs from the last
// run, or at the times of the cron expression Expr in zone TZ.
type Schedule struct {
	Kind    string  `json:"kind"`
	AtMs    *int64  `json:"atMs"`
	EveryMs *int64  `json:"everyMs"`
	Expr    *string `json:"expr"`
	TZ      *string `json:"tz"`
}

// Payload is what a run does: an agent turn with Message, delivered to
// Channel/To when Deliver.
type Payload struct {
	Kind    string  `json:"kind"`
	Message string  `json:"message"`
	Deliver bool    `json:"deliver"`
	Channel *string `json:"channel"`
	To      *string `json:"to"`
}

// State is the scheduler's bookkeeping. NextRunAtMs is the slot the job
// runs at next; it is advanced (and saved) before a run starts, which is
// what makes a slot run once even when the process dies during the run.
type State struct {
	NextRunAtMs *int64  `json:"nextRunAtMs"`
	LastRunAtMs *int64  `json:"lastRunAtMs"`
	LastStatus  *string `json:"lastStatus"`
	LastError   *string `json:"lastError"`
}

// Spec describes a job to add: exactly one of Every, Cron or At.
type Spec struct {
	Name    string
	Message string
	Every   time.Duration
	Cron    string
	TZ      string // only with Cron
	At      time.Time
	Deliver bool
	Channel string
	To      string
	// CatchUp: see Job.CatchUp.
	CatchUp bool
}

// NewJob validates spec and builds the job with its first run computed
// from now, in defaultZone when a cron expression has no zone of its own.
func NewJob(spec Spec, now time.Time, defaultZone *time.Location) (Job, error) {
	j := Job{
		ID:          newID(),
		Name:        spec.Name,
		Enabled:     true,
		Payload:     Payload{Kind: "agent_turn", Message: spec.Message, Deliver: spec.Deliver},
		CreatedAtMs: now.UnixMilli(),
		UpdatedAtMs: now.UnixMilli(),
		CatchUp:     spec.CatchUp,
	}
	if spec.Channel != "" {
		j.Payload.Channel = ptr(spec.Channel)
	}
	if spec.To != "" {
		j.Payload.To = ptr(spec.To)
	}
	n := 0
	if spec.Every != 0 {
		n++
	}
	if spec.Cron != "" {
		n++
	}
	if !spec.At.IsZero() {
		n++
	}
	switch {
	case n != 1:
		return Job{}, errors.New("a job needs exactly one of every, cron or at")
	case spec.TZ != "" && spec.Cron == "":
		return Job{}, errors.New("tz can only be used with cron")
	case spec.Every != 0:
		if spec.Every < time.Millisecond {
			return Job{}, fmt.Errorf("every %s: the interval must be positive", spec.Every)
		}
		j.Schedule = Schedule{Kind: KindEvery, EveryMs: ptr(spec.Every.Milliseconds())}
	case spec.Cron != "":
		j.Schedule = Schedule{Kind: KindCron, Expr: ptr(spec.Cron)}
		if spec.TZ != "" {
			j.Schedule.TZ = ptr(spec.TZ)
		}
	default:
		j.Schedule = Schedule{Kind: KindAt, AtMs: ptr(spec.At.UnixMilli())}
		j.DeleteAfterRun = true
	}
	if err := j.Schedule.Validate(); err != nil {
		return Job{}, err
	}
	next, ok := j.Schedule.Next(now, defaultZone)
	if !ok && j.Schedule.Kind == KindAt {
		return Job{}, fmt.Errorf("at %s is in the past", spec.At.Format(time.RFC3339))
	}
	if ok {
		j.State.NextRunAtMs = ptr(next.UnixMilli())
	}
	return j, nil
}

// Validate checks the schedule: its kind, its fields, the cron expression
// and the zone.
func (s Schedule) Validate() error {
	switch s.Kind {
	case KindAt:
		if s.AtMs == nil {
			return errors.New(`schedule kind "at" needs atMs`)
		}
	case KindEvery:
		if s.EveryMs == nil || *s.EveryMs <= 0 {
			return errors.New(`schedule kind "every" needs a positive everyMs`)
		}
	case KindCron:
		if s.Expr == nil || strings.TrimSpace(*s.Expr) == "" {
			return errors.New(`schedule kind "cron" needs expr`)
		}
		if !gronx.IsValid(gronxExpr(*s.Expr)) {
			return fmt.Errorf("cron expression %q is not valid", *s.Expr)
		}
	default:
		return fmt.Errorf("schedule kind %q is not one of at, every, cron", s.Kind)
	}
	if s.TZ != nil && *s.TZ != "" {
		if s.Kind != KindCron {
			return errors.New("tz can only be used with cron")
		}
		if _, err := loadZone(*s.TZ); err != nil {
			return err
		}
	}
	return nil
}

// Prompt is what the assistant is given when the job runs: nanobot's
// framing of the job's message.
func (j Job) Prompt() string {
	return "[Scheduled Task] Timer finished.\n\n" +
		"Task '" + j.Name + "' has been triggered.\n" +
		"Scheduled instruction: " + j.Payload.Message
}

// Problem is why a job can never run (an unknown zone, an expression
// that is not valid), nil when it can.
func (j Job) Problem() error {
	return j.Schedule.Validate()
}

// Zone is the zone the schedule's times are in: its tz, else def, else UTC.
func (s Schedule) Zone(def *time.Location) (*time.Location, error) {
	if s.TZ != nil && *s.TZ != "" {
		return loadZone(*s.TZ)
	}
	if def != nil {
		return def, nil
	}
	return time.UTC, nil
}

// gronxExpr is a cron expression as croniter (nanobot's) reads it,
// written as gronx reads it: croniter's sixth field is the seconds, and
// its seventh the year; gronx wants the seconds first.
func gronxExpr(expr string) string {
	f := strings.Fields(expr)
	if len(f) == 6 || len(f) == 7 {
		f = append([]string{f[5]}, append(f[:5:5], f[6:]...)...)
		return strings.Join(f, " ")
	}
	return expr
}

func loadZone(name string) (*time.Location, error) {
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q", name)
	}
	return loc, nil
}

// Describe is the schedule as nanobot's cron tool lists it:
// "cron: 0 9 * * 1-5 (America/Denver)", "every 2h", "at 2026-… (zone)".
func (s Schedule) Describe(def *time.Location) string {
	switch s.Kind {
	case KindEvery:
		if s.EveryMs != nil {
			return "every " + formatEvery(*s.EveryMs)
		}
	case KindCron:
		if s.Expr != nil {
			loc, err := s.Zone(def)
			if err != nil {
				return "cron: " + *s.Expr
			}
			return "cron: " + *s.Expr + " (" + loc.String() + ")"
		}
	case KindAt:
		if s.AtMs != nil {
			loc, _ := s.Zone(def)
			return "at " + time.UnixMilli(*s.AtMs).In(loc).Format("2006-01-02T15:04:05") + " (" + loc.String() + ")"
		}
	}
	return s.Kind
}

// formatEvery writes an interval as nanobot does: the largest unit that
// divides it (2h, 30m, 90s, 200ms).
func formatEvery(ms int64) string {
	switch {
	case ms%3_600_000 == 0:
		return fmt.Sprintf("%dh", ms/3_600_000)
	case ms%60_000 == 0:
		return fmt.Sprintf("%dm", ms/60_000)
	case ms%1000 == 0:
		return fmt.Sprintf("%ds", ms/1000)
	}
	return fmt.Sprintf("%dms", ms)
}

func newID() string {
	var b [4]byte
	rand.Read(b[:]) //nolint:errcheck // crypto/rand does not fail on Linux
	return hex.EncodeToString(b[:])
}

func ptr[T any](v T) *T { return &v }
