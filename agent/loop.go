package agent

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"

	"github.com/nbots/nb/tool"
)

// loopDetector notices a model that keeps making the same calls: the
// same call with the same arguments three times in a row, or a pattern
// of one, two or three calls repeating over the last window calls. The
// pattern test is periodicity (s[i] == s[i-k] across the window), so a
// 3-cycle is found in a window of 10, which the tiling test of the
// attractor agent-loop specification misses; after firing it waits a
// whole window before firing again.
type loopDetector struct {
	window    int
	sigs      []string
	names     []string
	lastFired int
}

// sameInARow is how many identical calls in a row stop the exchange.
const sameInARow = 3

func newLoopDetector(window int) *loopDetector {
	return &loopDetector{window: window, lastFired: -1 << 30}
}

// pattern names the calls of a repeating pattern of length k: the last k.
func (d *loopDetector) pattern(k int) []string {
	return d.names[len(d.names)-k:]
}

// signature is the call's name plus a hash of its canonical arguments
// (encoding/json sorts map keys, so key order does not matter).
func signature(c tool.Call) string {
	b, _ := json.Marshal(c.Arguments)
	sum := sha256.Sum256(b)
	return tool.MatchName(c.Name) + ":" + fmt.Sprintf("%x", sum[:8])
}

// add records a round's calls and returns the repeating pattern's length
// (1, 2 or 3) and how many calls repeat it (sameInARow, or the window)
// when the last calls loop, else 0, 0.
func (d *loopDetector) add(calls []tool.Call) (int, int) {
	for _, c := range calls {
		d.sigs = append(d.sigs, signature(c))
		d.names = append(d.names, c.Name)
	}
	n := len(d.sigs)
	if n-d.lastFired >= sameInARow && n >= sameInARow {
		same := true
		for i := n - sameInARow + 1; i < n; i++ {
			if d.sigs[i] != d.sigs[n-sameInARow] {
				same = false
				break
			}
		}
		if same {
			d.lastFired = n
			return 1, sameInARow
		}
	}
	if n < d.window || n-d.lastFired < d.window {
		return 0, 0
	}
	s := d.sigs[n-d.window:]
	for k := 1; k <= 3; k++ {
		loop := true
		for i := k; i < len(s); i++ {
			if s[i] != s[i-k] {
				loop = false
				break
			}
		}
		if loop {
			d.lastFired = n
			return k, d.window
		}
	}
	return 0, 0
}
