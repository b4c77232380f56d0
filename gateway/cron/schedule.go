package cron

import (
	"slices"
	"time"

	"github.com/adhocore/gronx"
)

// Next is the first run of the schedule strictly after after; false when
// there is none (an "at" already past, an invalid schedule, an expression
// that never matches again).
//
// Cron expressions are matched against the wall clock of the zone, and a
// matching wall-clock time becomes an instant thus: a time that happens
// twice (the repeated hour when clocks go back) is its first occurrence
// only; a time that does not happen (the hour skipped when clocks go
// forward) is the first instant after the gap, and several skipped times
// are that one instant, so the job runs once there.
func (s Schedule) Next(after time.Time, def *time.Location) (time.Time, bool) {
	switch s.Kind {
	case KindAt:
		if s.AtMs == nil {
			return time.Time{}, false
		}
		at := time.UnixMilli(*s.AtMs)
		return at, at.After(after)
	case KindEvery:
		if s.EveryMs == nil || *s.EveryMs <= 0 {
			return time.Time{}, false
		}
		return after.Add(time.Duration(*s.EveryMs) * time.Millisecond), true
	case KindCron:
		if s.Expr == nil {
			return time.Time{}, false
		}
		loc, err := s.Zone(def)
		if err != nil {
			return time.Time{}, false
		}
		return nextCron(gronxExpr(*s.Expr), after, loc)
	}
	return time.Time{}, false
}

// nextCron walks the expression's matches in wall-clock time (civil times
// held in UTC, where no day is longer or shorter than another) and maps
// each to an instant in loc until one is after after.
func nextCron(expr string, after time.Time, loc *time.Location) (time.Time, bool) {
	civil := wall(after.In(loc))
	// Just after clocks went back, the wall clock reads earlier than
	// before: start the walk back there so that no match is missed (what
	// maps to after or before it is skipped). 3 h covers every real shift.
	_, off := after.In(loc).Zone()
	if _, earlier := after.Add(-3 * time.Hour).In(loc).Zone(); earlier != off {
		civil = civil.Add(-3 * time.Hour)
	}
	for range 100_000 {
		c, err := gronx.NextTickAfter(expr, civil, false)
		if err != nil {
			return time.Time{}, false
		}
		if t := instant(c, loc); t.After(after) {
			return t, true
		}
		civil = c
	}
	return time.Time{}, false
}

// wall is t's wall-clock reading as a UTC time.
func wall(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// instant is the first instant at which loc's clocks read the civil time
// c, or, when they never do (a gap), the instant the gap ends.
func instant(c time.Time, loc *time.Location) time.Time {
	guess := time.Date(c.Year(), c.Month(), c.Day(), c.Hour(), c.Minute(), c.Second(), c.Nanosecond(), loc)
	// The offsets in force around c: a transition is at most one away.
	var offsets []int
	for _, d := range []time.Duration{-6 * time.Hour, 0, 6 * time.Hour} {
		_, off := guess.Add(d).Zone()
		if !slices.Contains(offsets, off) {
			offsets = append(offsets, off)
		}
	}
	var first time.Time
	for _, off := range offsets {
		t := c.Add(-time.Duration(off) * time.Second).In(loc)
		if wall(t).Equal(c) && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	if !first.IsZero() {
		return first
	}
	// A gap: read with the offset of before the gap, c is an instant after
	// the transition, which is where that instant's zone period starts.
	for _, off := range offsets {
		t := c.Add(-time.Duration(off) * time.Second).In(loc)
		if wall(t).After(c) {
			start, _ := t.ZoneBounds()
			return start
		}
	}
	return guess
}
