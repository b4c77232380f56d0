package cron

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/nbots/nb/gateway/replica"
	"github.com/nbots/nb/internal/atomicfile"
	"github.com/nbots/nb/internal/metric"
)

// RunFunc runs one job (the gateway runs its message as an agent turn in
// session "cron:<id>" and delivers the answer when the payload says so).
type RunFunc func(ctx context.Context, job Job) error

// Scheduler runs the jobs of a Store when they are due.
type Scheduler struct {
	Store *Store
	// RunJob runs a due job.
	RunJob RunFunc
	// Zone is agents.defaults.timezone, the zone of cron expressions
	// without a tz; nil is UTC.
	Zone *time.Location
	// Poll is how often jobs.json is checked for edits by other processes
	// (default 1 s): a job added meanwhile runs without a restart.
	Poll time.Duration
	// Log receives warnings (a failed run, missed slots); nil discards.
	Log *slog.Logger
	// Claims is asked before a scheduled slot runs (key "cron.<job
	// id>.<slot in ms>"): of replicas whose schedulers both found it due,
	// only the one that claims it first runs it. A scheduler alone takes
	// replica.Local, which grants every slot it has not seen (jobs.json,
	// edited under its lock, already makes that once on one machine).
	Claims replica.Claims

	seen fileStamp
	// broken remembers the jobs already reported as never running (their
	// id and the reason), so that each is said once.
	broken map[string]string
}

// ErrRunning is returned by Scheduler.Run when another process already
// schedules the jobs of this workspace.
var ErrRunning = errors.New("another gateway already runs the cron jobs of this workspace")

// SchedulerLockPath is the file that a running scheduler holds locked:
// `nb gateway cron` uses it to tell whether a gateway runs the jobs.
func (s *Store) SchedulerLockPath() string {
	return filepath.Join(filepath.Dir(s.Path), ".scheduler.lock")
}

// Running reports whether a scheduler runs the jobs of the store now.
func (s *Store) Running() bool {
	if err := os.MkdirAll(filepath.Dir(s.Path), 0o700); err != nil {
		return false
	}
	unlock, err := atomicfile.TryLock(s.SchedulerLockPath())
	if err != nil {
		return errors.Is(err, atomicfile.ErrLocked)
	}
	unlock()
	return false
}

// Run schedules until ctx ends. It returns ErrRunning when another
// process schedules the same jobs.
func (s *Scheduler) Run(ctx context.Context) error {
	if err := os.MkdirAll(filepath.Dir(s.Store.Path), 0o700); err != nil {
		return fmt.Errorf("cron: %w", err)
	}
	unlock, err := atomicfile.TryLock(s.Store.SchedulerLockPath())
	if errors.Is(err, atomicfile.ErrLocked) {
		return ErrRunning
	}
	if err != nil {
		return fmt.Errorf("cron: %w", err)
	}
	defer unlock()
	if err := s.Start(ctx); err != nil && ctx.Err() == nil {
		s.logger().Warn("cron: " + err.Error())
	}
	for {
		next, err := s.Tick(ctx)
		if err != nil && ctx.Err() == nil {
			s.logger().Warn("cron: " + err.Error())
		}
		wait := s.poll()
		if !next.IsZero() {
			wait = min(wait, max(next.Sub(time.Now()), 0))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// Tick runs the jobs due now and returns when the next one is due (zero:
// none). Due jobs are claimed (their next slot computed and saved) under
// the store's lock before they run, so that a slot runs once even if the
// process dies during the run or two processes tick together; they run
// one after the other, as nanobot runs them.
func (s *Scheduler) Tick(ctx context.Context) (time.Time, error) {
	now := time.Now()
	stamp := stampOf(s.Store.Path)
	if stamp.same(s.seen) && (s.seen.nextDue.IsZero() || now.Before(s.seen.nextDue)) {
		// Nothing changed, nothing due: none at all when no enabled
		// job has a next run (no jobs), until jobs.json changes.
		return s.seen.nextDue, nil
	}
	var due []Job
	var slots []int64
	var next time.Time
	var coalesced int
	err := s.Store.Edit(ctx, func(f *File) error {
		s.reportBroken(f)
		due, slots, next, coalesced = s.claim(f, now)
		return nil
	})
	if err != nil {
		return time.Time{}, err
	}
	metric.CronMissed("coalesced", coalesced)
	s.seen = stampOf(s.Store.Path)
	s.seen.nextDue = next
	for i, j := range due {
		if ctx.Err() != nil {
			break
		}
		if slots[i] != 0 {
			ok, err := s.Claims.Claim(ctx, fmt.Sprintf("cron.%s.%d", j.ID, slots[i]))
			if err != nil {
				// Better a slot missed than run twice: say so.
				s.logger().Warn(fmt.Sprintf("cron: job %q (%s) not run: its slot could not be claimed: %v", j.Name, j.ID, err))
				metric.CronMissed("claim_error", 1)
				continue
			}
			if !ok {
				continue // another replica runs it
			}
		}
		s.runOne(ctx, j)
	}
	if len(due) > 0 {
		s.seen = fileStamp{} // our own status writes: read again
	}
	return next, nil
}

// StartGrace is how late a slot may be at the scheduler's start and
// still run (nanobot skips it however late).
const StartGrace = time.Minute

// Start settles, once, the runs missed while no scheduler ran (see
// skipMissed) and reports the jobs that can never run. Run calls it
// before its first Tick.
func (s *Scheduler) Start(ctx context.Context) error {
	now := time.Now()
	var skipped, expired int
	err := s.Store.Edit(ctx, func(f *File) error {
		skipped, expired = s.skipMissed(f, now)
		s.reportBroken(f)
		return nil
	})
	if err == nil {
		metric.CronMissed("skipped", skipped)
		metric.CronMissed("expired", expired)
	}
	return err
}

// skipMissed is what the scheduler does at its start with the runs it
// missed while no gateway ran: nanobot's (CronService.start recomputes
// every enabled job's next run from now), so a job whose slot passed
// runs next at its next slot after now, and an "at" job whose time
// passed is disabled without running; a job with catchUp runs once now
// instead. A slot still to come is kept as it is, and so is one due in
// the StartGrace before the start (a restart, a replica taking over):
// it runs now. It returns the slots skipped and the one-time jobs
// disabled (the misses nb_gateway_cron_misses_total counts).
func (s *Scheduler) skipMissed(f *File, now time.Time) (skipped, expired int) {
	nowMs := now.UnixMilli()
	for i := range f.Jobs {
		j := &f.Jobs[i]
		if !j.Enabled || j.RunNow || j.CatchUp || j.State.NextRunAtMs == nil || *j.State.NextRunAtMs > nowMs-StartGrace.Milliseconds() {
			continue
		}
		missed := time.UnixMilli(*j.State.NextRunAtMs)
		if t, ok := j.Schedule.Next(now, s.Zone); ok && j.Schedule.Kind != KindAt {
			skipped += 1 + s.missed(*j, missed, now)
			j.State.NextRunAtMs = ptr(t.UnixMilli())
			s.logger().Info(fmt.Sprintf("cron: job %q (%s) missed its run of %s while the gateway was stopped: skipped, as nanobot skips it (\"catchUp\": true runs it once at start); next run %s",
				j.Name, j.ID, missed.Format(time.RFC3339), t.Format(time.RFC3339)))
			continue
		}
		j.State.NextRunAtMs = nil
		if j.Schedule.Kind == KindAt {
			j.Enabled = false
			j.UpdatedAtMs = nowMs
			expired++
			s.logger().Warn(fmt.Sprintf("cron: one-time job %q (%s) was due at %s while the gateway was stopped: not run, and disabled, as nanobot leaves it (\"catchUp\": true runs it once at start)",
				j.Name, j.ID, missed.Format(time.RFC3339)))
		}
	}
	return skipped, expired
}

// reportBroken says, once each, which enabled jobs can never run: an
// unknown zone or a cron expression that is not valid (nanobot, too,
// never runs them, and says nothing).
func (s *Scheduler) reportBroken(f *File) {
	for _, j := range f.Jobs {
		err := j.Problem()
		if err == nil || !j.Enabled {
			continue
		}
		if s.broken[j.ID] == err.Error() {
			continue
		}
		if s.broken == nil {
			s.broken = map[string]string{}
		}
		s.broken[j.ID] = err.Error()
		s.logger().Warn(fmt.Sprintf("cron: job %q (%s) never runs: %v: fix its schedule in %s, or remove it (nb gateway cron remove %s)", j.Name, j.ID, err, s.Store.Path, j.ID))
	}
}

// claim takes the jobs of f due at now, advancing their schedules, and
// returns them with their slots (0: run by hand), the earliest next run
// of all jobs, and the slots that passed unrun (a job due more than once
// since its last run runs once).
func (s *Scheduler) claim(f *File, now time.Time) ([]Job, []int64, time.Time, int) {
	var due []Job
	var slots []int64
	var next time.Time
	coalesced := 0
	nowMs := now.UnixMilli()
	kept := f.Jobs[:0]
	for _, j := range f.Jobs {
		run := j.RunNow
		j.RunNow = false
		slotMs := int64(0)
		if j.Enabled && j.State.NextRunAtMs == nil {
			// Added by hand or by a writer that left the first run to us.
			if t, ok := j.Schedule.Next(now, s.Zone); ok {
				j.State.NextRunAtMs = ptr(t.UnixMilli())
			} else if j.Schedule.Kind == KindAt && j.Schedule.AtMs != nil {
				j.State.NextRunAtMs = ptr(*j.Schedule.AtMs) // past: run once now
			}
		}
		if j.Enabled && j.State.NextRunAtMs != nil && *j.State.NextRunAtMs <= nowMs {
			slotMs = *j.State.NextRunAtMs
			slot := time.UnixMilli(slotMs)
			if missed := s.missed(j, slot, now); missed > 0 {
				coalesced += missed
				s.logger().Warn(fmt.Sprintf("cron: job %q (%s) missed %d run(s) while the gateway was stopped; running it once now", j.Name, j.ID, missed))
			}
			run = true
			j.State.LastRunAtMs = ptr(nowMs)
			if t, ok := j.Schedule.Next(now, s.Zone); ok && j.Schedule.Kind != KindAt {
				j.State.NextRunAtMs = ptr(t.UnixMilli())
			} else {
				j.State.NextRunAtMs = nil
				if j.Schedule.Kind == KindAt {
					if j.DeleteAfterRun {
						due, slots = append(due, j), append(slots, slotMs)
						continue
					}
					j.Enabled = false
				}
			}
			j.UpdatedAtMs = nowMs
		}
		if run {
			due, slots = append(due, j), append(slots, slotMs)
		}
		if j.Enabled && j.State.NextRunAtMs != nil {
			if t := time.UnixMilli(*j.State.NextRunAtMs); next.IsZero() || t.Before(next) {
				next = t
			}
		}
		kept = append(kept, j)
	}
	f.Jobs = kept
	return due, slots, next, coalesced
}

// missed counts the slots after slot that passed before now.
func (s *Scheduler) missed(j Job, slot, now time.Time) int {
	n := 0
	for t, ok := j.Schedule.Next(slot, s.Zone); ok && !t.After(now) && n < 10_000; t, ok = j.Schedule.Next(t, s.Zone) {
		if j.Schedule.Kind == KindEvery {
			// every is counted from the last run, not on a grid
			return int(now.Sub(slot) / (time.Duration(*j.Schedule.EveryMs) * time.Millisecond))
		}
		n++
	}
	return n
}

// runOne runs a claimed job and records how it went.
func (s *Scheduler) runOne(ctx context.Context, j Job) {
	err := s.RunJob(ctx, j)
	status, msg := "ok", (*string)(nil)
	switch {
	case err != nil && ctx.Err() != nil:
		status, msg = "error", ptr("interrupted: the gateway stopped during the run")
	case err != nil:
		status, msg = "error", ptr(err.Error())
		s.logger().Warn(fmt.Sprintf("cron: job %q (%s) failed: %v", j.Name, j.ID, err))
	}
	if werr := s.Store.RecordRun(context.WithoutCancel(ctx), j.ID, status, msg); werr != nil {
		s.logger().Warn("cron: " + werr.Error())
	}
}

func (s *Scheduler) poll() time.Duration {
	if s.Poll <= 0 {
		return time.Second
	}
	return s.Poll
}

func (s *Scheduler) logger() *slog.Logger {
	if s.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Log
}

// fileStamp tells whether jobs.json changed since the last read, so that an
// idle scheduler takes no lock and parses nothing.
type fileStamp struct {
	size    int64
	mod     time.Time
	ino     uint64
	nextDue time.Time
}

func (f fileStamp) same(g fileStamp) bool {
	return !f.mod.IsZero() && f.size == g.size && f.mod.Equal(g.mod) && f.ino == g.ino
}

func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{size: fi.Size(), mod: fi.ModTime(), ino: inode(fi)}
}
