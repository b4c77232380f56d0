package main

import "testing"

func TestChomp(t *testing.T) {
	for in, want := range map[string]string{"a\n": "a", "a\r\n": "a", "a\r": "a", "a\n\n": "a\n", "a": "a", "": "", "\n": ""} {
		if got := chomp(in); got != want {
			t.Errorf("chomp(%q) = %q, want %q", in, got, want)
		}
	}
}
