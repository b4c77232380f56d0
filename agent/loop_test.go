package agent

import (
	"strings"
	"testing"

	"github.com/nbots/nb/tool"
)

// calls turns "A,B,C" into calls named a, b, c with the same arguments.
func namedCalls(pattern string) []tool.Call {
	var out []tool.Call
	for _, name := range strings.Split(pattern, ",") {
		out = append(out, tool.Call{Name: strings.ToLower(name), Arguments: map[string]any{}})
	}
	return out
}

// The detector works on single calls, whatever the rounds: it tests
// periodicity over the last 10 calls, so a 3-cycle is found at window 10.
func TestLoopDetectorPatterns(t *testing.T) {
	cases := []struct {
		calls string
		want  int // pattern length at the last call, 0 for none
	}{
		{"A,A,A,A,A,A,A,A,A", 0}, // fewer than 10 calls
		{"A,A,A,A,A,A,A,A,A,A", 1},
		{"B,A,A,A,A,A,A,A,A,A", 0},
		{"B,A,A,A,A,A,A,A,A,A,A", 1}, // only the last 10 count
		{"A,B,A,B,A,B,A,B,A,B", 2},
		{"A,B,A,B,A,B,A,B,A,A", 0},
		{"A,B,C,A,B,C,A,B,C,A", 3}, // the case tiling misses
		{"C,A,B,C,A,B,C,A,B,C", 3},
		{"A,B,C,D,A,B,C,D,A,B", 0}, // a 4-cycle is not looked for
		{"A,B,C,A,B,C,A,B,C,B", 0},
		{"A,B,C,D,E,F,G,H,I,J", 0},
	}
	for _, tc := range cases {
		d := newLoopDetector(10)
		got := 0
		for _, c := range namedCalls(tc.calls) {
			got = d.add([]tool.Call{c})
		}
		if got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.calls, got, tc.want)
		}
		// One round with all the calls gives the same answer.
		d = newLoopDetector(10)
		if got := d.add(namedCalls(tc.calls)); got != tc.want {
			t.Errorf("%s in one round: got %d, want %d", tc.calls, got, tc.want)
		}
	}
}

// After a warning, the detector stays quiet until a whole window of new
// calls has been made, then warns again if the loop goes on.
func TestLoopDetectorWaitsAWindow(t *testing.T) {
	d := newLoopDetector(10)
	var fired []int
	for i := 1; i <= 30; i++ {
		if d.add(namedCalls("A")) > 0 {
			fired = append(fired, i)
		}
	}
	if len(fired) != 3 || fired[0] != 10 || fired[1] != 20 || fired[2] != 30 {
		t.Errorf("fired at calls %v, want [10 20 30]", fired)
	}
}

// Arguments count: the same name with other arguments is another call;
// key order and number spelling of the same object are the same call.
func TestLoopSignature(t *testing.T) {
	a := tool.Call{Name: "get-weather", Arguments: map[string]any{"a": int64(1), "b": "x"}}
	b := tool.Call{Name: "get_weather", Arguments: map[string]any{"b": "x", "a": int64(1)}}
	c := tool.Call{Name: "get_weather", Arguments: map[string]any{"a": int64(2), "b": "x"}}
	if signature(a) != signature(b) {
		t.Errorf("same call, different signatures: %s %s", signature(a), signature(b))
	}
	if signature(a) == signature(c) {
		t.Errorf("different arguments, same signature")
	}
}
