package arg

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestInt(t *testing.T) {
	args := map[string]any{"i": int64(3), "f": 4.0, "s": " 5 ", "n": json.Number("6"), "half": 2.5, "text": "x", "big": int64(99), "b": true}
	for name, want := range map[string]int{"i": 3, "f": 4, "s": 5, "n": 6, "absent": 7} {
		if got, err := Int(args, name, 7, 0, 10); err != nil || got != want {
			t.Errorf("Int(%s) = %d, %v; want %d", name, got, err, want)
		}
	}
	for name, want := range map[string]string{"half": "whole number", "text": "whole number", "big": "between 0 and 10", "b": "not true/false"} {
		if _, err := Int(args, name, 7, 0, 10); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), name) {
			t.Errorf("Int(%s) error = %v, want %q", name, err, want)
		}
	}
}

func TestStringBoolStrings(t *testing.T) {
	args := map[string]any{"s": "x", "n": int64(1), "t": "TRUE", "b": false, "l": []any{"a", "b"}, "one": "c", "bad": []any{"a", int64(1)}}
	if s, err := String(args, "s", true); err != nil || s != "x" {
		t.Errorf("String(s) = %q, %v", s, err)
	}
	if _, err := String(args, "absent", true); err == nil || !strings.Contains(err.Error(), "the argument absent is missing") {
		t.Errorf("String(absent) = %v", err)
	}
	if _, err := String(args, "n", false); err == nil || !strings.Contains(err.Error(), "must be text, not a number") {
		t.Errorf("String(n) = %v", err)
	}
	if b, err := Bool(args, "t", false); err != nil || !b {
		t.Errorf("Bool(t) = %v, %v", b, err)
	}
	if b, err := Bool(args, "b", true); err != nil || b {
		t.Errorf("Bool(b) = %v, %v", b, err)
	}
	if _, err := Bool(args, "s", false); err == nil {
		t.Error("Bool(s) accepted x")
	}
	if l, err := Strings(args, "l"); err != nil || !slices.Equal(l, []string{"a", "b"}) {
		t.Errorf("Strings(l) = %v, %v", l, err)
	}
	if l, err := Strings(args, "one"); err != nil || !slices.Equal(l, []string{"c"}) {
		t.Errorf("Strings(one) = %v, %v", l, err)
	}
	if _, err := Strings(args, "bad"); err == nil || !strings.Contains(err.Error(), "bad[1] must be text") {
		t.Errorf("Strings(bad) = %v", err)
	}
}
