// Package color turns the colour names cartridges use into ANSI escape
// sequences the way the reference implementation (Rainbow 3.1.1) does: the
// eight ANSI names first, then the X11 names as 256-colour codes computed by
// truncation into the 6x6x6 cube, then the effect names.
package color

import (
	"fmt"
	"strings"
	"sync"
)

var ansi = map[string]int{"black": 0, "red": 1, "green": 2, "yellow": 3, "blue": 4, "magenta": 5, "cyan": 6, "white": 7}

var effects = map[string]int{
	"reset": 0, "bright": 1, "bold": 1, "faint": 2, "dark": 2, "italic": 3, "underline": 4,
	"blink": 5, "inverse": 7, "hide": 8, "cross_out": 9,
}

// x11Index is the X11 names' positions in x11, built on first use: every
// nb command links this package, few name a colour.
var x11Index = sync.OnceValue(func() map[string]int {
	m := make(map[string]int, len(x11))
	for i, c := range x11 {
		m[c.name] = i
	}
	return m
})

// Code256 is the reference's 256-colour code for an RGB colour:
// 16 + 36·q(r) + 6·q(g) + q(b) with q(v) = floor(6·v/256).
func Code256(r, g, b int) int {
	q := func(v int) int { return 6 * v / 256 }
	return 16 + 36*q(r) + 6*q(g) + q(b)
}

// SGR returns the escape sequence that starts the named colour or effect.
// Names are matched without regard to case and surrounding space.
func SGR(name string) (string, error) {
	n := strings.ToLower(strings.TrimSpace(name))
	if c, ok := ansi[n]; ok {
		return fmt.Sprintf("\x1b[%dm", 30+c), nil
	}
	if i, ok := x11Index()[n]; ok {
		c := x11[i]
		return fmt.Sprintf("\x1b[38;5;%dm", Code256(c.r, c.g, c.b)), nil
	}
	if e, ok := effects[n]; ok {
		return fmt.Sprintf("\x1b[%dm", e), nil
	}
	return "", fmt.Errorf("unknown colour %q: use one of the 8 ANSI names (black, red, green, yellow, blue, magenta, cyan, white) or an X11 name such as deeppink or lightblue", name)
}

// Valid reports whether name is a colour or effect SGR accepts.
func Valid(name string) bool {
	_, err := SGR(name)
	return err == nil
}

const reset = "\x1b[0m"

// Wrap colours text as the reference does: the sequence goes after any
// escape sequences already at the start of the text, and a reset is
// appended unless the text already ends with one. An empty sgr or text
// returns text unchanged.
func Wrap(text, sgr string) string {
	if sgr == "" || text == "" {
		return text
	}
	i := 0
	for strings.HasPrefix(text[i:], "\x1b[") {
		j := strings.IndexByte(text[i:], 'm')
		if j < 0 {
			break
		}
		i += j + 1
	}
	out := text[:i] + sgr + text[i:]
	if !strings.HasSuffix(out, reset) {
		out += reset
	}
	return out
}
