package tool

import (
	"context"
	"strings"
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

func TestProviderName(t *testing.T) {
	long := strings.Repeat("x", 70)
	for _, tt := range []struct{ in, want string }{
		{"get-current-weather", "get-current-weather"},
		{"get_current_weather", "get_current_weather"},
		{"bad name with spaces", "bad_name_with_spaces"},
		{"files__read.text", "files__read_text"},
		{"9lives", "_9lives"},
		{"café", "caf_"},
		{"", "_"},
	} {
		if got := ProviderName(tt.in); got != tt.want {
			t.Errorf("ProviderName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	a, b := ProviderName(long+"a"), ProviderName(long+"b")
	if len(a) != 64 || len(b) != 64 || a == b {
		t.Errorf("long names: %q %q", a, b)
	}
}

func TestSetWireNames(t *testing.T) {
	var s Set
	s.Add(named("a b"))   // a_b
	s.Add(named("a.b"))   // MatchName "ab": a different tool, wire a_b taken
	s.Add(named("a.b.c")) // a_b_c
	specs := s.Specs()
	var names []string
	for _, sp := range specs {
		names = append(names, sp.Name)
	}
	if strings.Join(names, " ") != "a_b a_b_2 a_b_c" {
		t.Fatalf("wire names = %v", names)
	}
	if got, ok := s.Lookup("a_b_2"); !ok || got.Spec().Name != "a.b" {
		t.Errorf("Lookup(a_b_2) = %v, %v", got, ok)
	}
	if got, ok := s.Lookup("a_b"); !ok || got.Spec().Name != "a b" {
		t.Errorf("Lookup(a_b) = %v, %v", got, ok)
	}
	if len(s.Tools()) != 3 {
		t.Errorf("Tools() = %d", len(s.Tools()))
	}
}

// TestSetClone: a clone holds the same tools under the same names as a
// set built again by adding them in order, and adding to it (a clash of
// wire names, a replacement, a new tool) leaves the original as it was.
func TestSetClone(t *testing.T) {
	var s Set
	for _, n := range []string{"a b", "a_b", "clock", "a-b!"} {
		s.Add(named(n))
	}
	c := s.Clone()
	var again Set
	for _, tl := range s.Tools() {
		again.Add(tl)
	}
	if got, want := specNames(c.Specs()), specNames(again.Specs()); got != want {
		t.Fatalf("clone offers %s, a set built again %s", got, want)
	}
	before := specNames(s.Specs())
	c.Add(named("a.b"))   // a wire name taken: a suffix
	c.Add(named("CLOCK")) // replaces clock in the clone only
	c.Add(named("new"))
	if got := specNames(s.Specs()); got != before {
		t.Fatalf("adding to the clone changed the original: %s, was %s", got, before)
	}
	if _, ok := s.Lookup("new"); ok {
		t.Fatal("the original finds a tool added to its clone")
	}
	if got := specNames(c.Specs()); got != "a_b clock a-b_ a_b_2 new" {
		t.Fatalf("the clone after adding offers %s", got)
	}
	if tl, _ := c.Lookup("clock"); tl.Spec().Name != "CLOCK" {
		t.Fatalf("clock in the clone is %q", tl.Spec().Name)
	}
	if tl, _ := s.Lookup("clock"); tl.Spec().Name != "clock" {
		t.Fatalf("clock in the original is %q", tl.Spec().Name)
	}
	var nilSet *Set
	if nilSet.Clone().Len() != 0 {
		t.Fatal("a nil set's clone is not empty")
	}
}

func specNames(specs []Spec) string {
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	return strings.Join(names, " ")
}
