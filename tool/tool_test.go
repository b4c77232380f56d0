package tool

import (
	"context"
	"testing"
)

func TestMatchName(t *testing.T) {
	for _, names := range [][]string{
		{"what-time-is-it", "what_time_is_it", "What Time Is It", "what time  is-it"},
		{"get-current-weather", "get_current_weather", "Get Current Weather"},
		{"a.b", "ab"},
	} {
		want := MatchName(names[0])
		for _, n := range names[1:] {
			if got := MatchName(n); got != want {
				t.Errorf("MatchName(%q) = %q, want %q (as %q)", n, got, want, names[0])
			}
		}
	}
	if MatchName("what-time-is-it") != "what_time_is_it" {
		t.Errorf("MatchName = %q", MatchName("what-time-is-it"))
	}
	if MatchName("clock") == MatchName("clock2") {
		t.Error("different names matched")
	}
}

type named string

func (n named) Spec() Spec                             { return Spec{Name: string(n)} }
func (n named) Run(context.Context, Call) (any, error) { return string(n), nil }

func TestSet(t *testing.T) {
	var s Set
	s.Add(named("get-current-weather"))
	s.Add(named("clock"))
	s.Add(named("Clock")) // replaces clock
	if s.Len() != 2 {
		t.Fatalf("len %d", s.Len())
	}
	got, ok := s.Lookup("get_current_weather")
	if !ok || got.Spec().Name != "get-current-weather" {
		t.Fatalf("lookup: %v %v", got, ok)
	}
	if c, _ := s.Lookup("clock"); c.Spec().Name != "Clock" {
		t.Errorf("replacement: %v", c.Spec().Name)
	}
	if _, ok := s.Lookup("nothing"); ok {
		t.Error("found a missing tool")
	}
	var nilSet *Set
	if _, ok := nilSet.Lookup("x"); ok || nilSet.Len() != 0 || nilSet.Specs() != nil {
		t.Error("nil set")
	}
}
