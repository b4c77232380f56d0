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

// The detector works on single calls, whatever the rounds: the same
// call three times in a row, or a pattern of two or three calls
// repeating over the last 10 calls (a 3-cycle is found at window 10).
func TestLoopDetectorPatterns(t *testing.T) {
	cases := []struct {
		calls string
		want  int // pattern length of the first firing, 0 for none
		at    int // the call that fires
	}{
		{"A,A", 0, 0},
		{"A,A,A", 1, 3},
		{"B,A,A,A", 1, 4},
		{"A,A,B,B,C,C,A,A", 0, 0}, // twice in a row is not a loop
		{"A,B,A,B,A,B,A,B,A,B", 2, 10},
		{"A,B,A,B,A,B,A,B,A,A", 0, 0},
		{"A,B,C,A,B,C,A,B,C,A", 3, 10}, // the case tiling misses
		{"C,A,B,C,A,B,C,A,B,C", 3, 10},
		{"A,B,C,D,A,B,C,D,A,B", 0, 0}, // a 4-cycle is not looked for
		{"A,B,C,A,B,C,A,B,C,B", 0, 0},
		{"A,B,C,D,E,F,G,H,I,J", 0, 0},
	}
	for _, tc := range cases {
		d := newLoopDetector(10)
		got, at := 0, 0
		for i, c := range namedCalls(tc.calls) {
			if k, _ := d.add([]tool.Call{c}); k > 0 && got == 0 {
				got, at = k, i+1
			}
		}
		if got != tc.want || at != tc.at {
			t.Errorf("%s: fired %d at call %d, want %d at %d", tc.calls, got, at, tc.want, tc.at)
		}
		// One round with all the calls gives the same answer.
		d = newLoopDetector(10)
		if got, _ := d.add(namedCalls(tc.calls)); got != tc.want {
			t.Errorf("%s in one round: got %d, want %d", tc.calls, got, tc.want)
		}
	}
}

// After firing, the detector stays quiet until enough new calls have
// been made, then fires again if the loop goes on.
func TestLoopDetectorWaitsAfterFiring(t *testing.T) {
	d := newLoopDetector(10)
	var fired []int
	for i := 1; i <= 9; i++ {
		if k, _ := d.add(namedCalls("A")); k > 0 {
			fired = append(fired, i)
		}
	}
	if len(fired) != 3 || fired[0] != 3 || fired[1] != 6 || fired[2] != 9 {
		t.Errorf("fired at calls %v, want [3 6 9]", fired)
	}
	d = newLoopDetector(10)
	fired = nil
	for i := 1; i <= 30; i++ {
		if k, _ := d.add(namedCalls("A,B")[i%2:][:1]); k > 0 {
			fired = append(fired, i)
		}
	}
	if len(fired) != 3 || fired[0] != 10 || fired[1] != 20 || fired[2] != 30 {
		t.Errorf("alternating: fired at calls %v, want [10 20 30]", fired)
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
