package cron

import (
	"testing"
	"time"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("zone %s: %v", name, err)
	}
	return loc
}

func cronSchedule(expr, tz string) Schedule {
	return Schedule{Kind: KindCron, Expr: &expr, TZ: &tz}
}

// TestNextAcrossTransitions checks real zone transitions: a time in the
// spring-forward gap runs at the first instant after it, a time in the
// fall-back repeat runs at its first occurrence and not again.
func TestNextAcrossTransitions(t *testing.T) {
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		name, zone, expr string
		after            string
		want             []string // successive runs, UTC
	}{
		{"NY gap", "America/New_York", "30 2 * * *", "2026-03-08T05:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}},
		{"NY repeat", "America/New_York", "30 1 * * *", "2026-11-01T04:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		{"NY quarter hours through gap", "America/New_York", "*/30 * * * *", "2026-03-08T06:15:00Z",
			[]string{"2026-03-08T06:30:00Z", "2026-03-08T07:00:00Z", "2026-03-08T07:30:00Z"}},
		{"NY quarter hours through repeat", "America/New_York", "0,30 * * * *", "2026-11-01T05:15:00Z",
			// 01:30 EDT, then 02:00 EST: the repeated 01:00 and 01:30 EST are not run again
			[]string{"2026-11-01T05:30:00Z", "2026-11-01T07:00:00Z"}},
		{"London gap", "Europe/London", "30 1 * * *", "2026-03-29T00:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"London repeat", "Europe/London", "30 1 * * *", "2026-10-25T00:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		{"Lord Howe gap (30 min)", "Australia/Lord_Howe", "15 2 * * *", "2026-10-03T14:00:00Z",
			[]string{"2026-10-03T15:30:00Z", "2026-10-04T15:15:00Z"}},
		{"Lord Howe repeat (30 min)", "Australia/Lord_Howe", "45 1 * * *", "2026-04-04T14:00:00Z",
			[]string{"2026-04-04T14:45:00Z", "2026-04-05T15:15:00Z"}},
		{"plain", "UTC", "0 9 * * 1-5", "2026-11-27T10:00:00Z", // a Friday
			[]string{"2026-11-30T09:00:00Z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := cronSchedule(tc.expr, tc.zone)
			if err := s.Validate(); err != nil {
				t.Fatal(err)
			}
			after := utc(tc.after)
			for i, w := range tc.want {
				got, ok := s.Next(after, nil)
				if !ok || !got.Equal(utc(w)) {
					t.Fatalf("run %d after %s: got %s (%v), want %s", i, after.Format(time.RFC3339), got.UTC().Format(time.RFC3339), ok, w)
				}
				after = got
			}
		})
	}
}

func TestScheduleErrors(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		spec Spec
		want string
	}{
		{Spec{Name: "x", Message: "m", Every: time.Minute, TZ: "UTC"}, "tz can only be used with cron"},
		{Spec{Name: "x", Message: "m", Cron: "0 9 * * *", TZ: "Mars/Olympus"}, `unknown time zone "Mars/Olympus"`},
		{Spec{Name: "x", Message: "m", Cron: "61 * * * *"}, `cron expression "61 * * * *" is not valid`},
		{Spec{Name: "x", Message: "m"}, "a job needs exactly one of every, cron or at"},
		{Spec{Name: "x", Message: "m", Every: time.Minute, Cron: "* * * * *"}, "a job needs exactly one of every, cron or at"},
		{Spec{Name: "x", Message: "m", At: now.Add(-time.Hour)}, "at 2025-12-31T23:00:00Z is in the past"},
	} {
		_, err := NewJob(tc.spec, now, nil)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%+v: got %v, want %q", tc.spec, err, tc.want)
		}
	}
	j, err := NewJob(Spec{Name: "v", Message: "m", Cron: "0 9 * * *", TZ: "America/Vancouver"}, now, nil)
	if err != nil || j.State.NextRunAtMs == nil {
		t.Fatalf("America/Vancouver: %v, next %v", err, j.State.NextRunAtMs)
	}
}

func TestDescribe(t *testing.T) {
	every := func(ms int64) Schedule { return Schedule{Kind: KindEvery, EveryMs: &ms} }
	for _, tc := range []struct {
		s    Schedule
		want string
	}{
		{cronSchedule("0 9 * * 1-5", "America/Denver"), "cron: 0 9 * * 1-5 (America/Denver)"},
		{every(7_200_000), "every 2h"},
		{every(1_800_000), "every 30m"},
		{every(30_000), "every 30s"},
		{every(90_000), "every 90s"},
		{every(200), "every 200ms"},
		{Schedule{Kind: KindAt, AtMs: ptr(int64(1_790_000_000_000)), TZ: ptr("Asia/Shanghai")}, "at 2026-09-21T22:13:20 (Asia/Shanghai)"},
	} {
		if got := tc.s.Describe(nil); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}
