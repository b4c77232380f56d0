package color

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"
)

func TestReferenceVectors(t *testing.T) {
	for name, want := range map[string]string{
		"deeppink": "\x1b[38;5;199m", "lightblue": "\x1b[38;5;195m", "orangered": "\x1b[38;5;202m",
		"purple": "\x1b[38;5;129m", "gray": "\x1b[38;5;188m", "blue": "\x1b[34m", "red": "\x1b[31m",
		"cyan": "\x1b[36m", "olive": "\x1b[38;5;142m", "aqua": "\x1b[38;5;51m", "orange": "\x1b[38;5;214m",
		"bold": "\x1b[1m", "DeepPink": "\x1b[38;5;199m",
	} {
		got, err := SGR(name)
		if err != nil || got != want {
			t.Errorf("SGR(%q) = %q, %v; want %q", name, got, err, want)
		}
	}
	if got := Wrap("➜ ", "\x1b[38;5;199m"); got != "\x1b[38;5;199m➜ \x1b[0m" {
		t.Errorf("Wrap: %q", got)
	}
	if got := Wrap("\x1b[1mx\x1b[0m", "\x1b[31m"); got != "\x1b[1m\x1b[31mx\x1b[0m" {
		t.Errorf("Wrap after existing SGR: %q", got)
	}
	for _, bad := range []string{"grey", "default", "darkgrey", ""} {
		if _, err := SGR(bad); err == nil {
			t.Errorf("SGR(%q) accepted", bad)
		}
	}
}

// TestAllX11Codes checks every code of the reference's table (extracted
// from shared/reference/nano-bots.md when it is there).
func TestAllX11Codes(t *testing.T) {
	if len(x11) != 145 {
		t.Fatalf("%d X11 names, want 145", len(x11))
	}
	data, err := os.ReadFile("testdata/x11codes.json")
	if err != nil {
		t.Fatal(err)
	}
	var codes map[string]int
	if err := json.Unmarshal(data, &codes); err != nil {
		t.Fatal(err)
	}
	for _, c := range x11 {
		if _, isANSI := ansi[c.name]; isANSI {
			continue
		}
		want := fmt.Sprintf("\x1b[38;5;%dm", codes[c.name])
		if got, _ := SGR(c.name); got != want {
			t.Errorf("%s: %q, want %q", c.name, got, want)
		}
	}
}
