package pgstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/nbots/nb/state"
)

// TestBeginAfter: an exchange that reads only the events after those
// the caller has gets them and the number stored; after a deletion, the
// whole history.
func TestBeginAfter(t *testing.T) {
	_, open := opener(t, testTTL)
	st := open("pw")
	ctx := context.Background()
	conv, err := st.Open(state.Bot{Author: "T", Name: "Tail"}, "u", "k")
	if err != nil {
		t.Fatal(err)
	}
	msg := func(i int) state.Event { return state.Event{Who: state.RoleUser, Message: fmt.Sprint("m", i)} }
	for i := range 5 {
		if err := state.Append(ctx, conv, msg(i)); err != nil {
			t.Fatal(err)
		}
	}
	tb := conv.(state.TailBeginner)
	check := func(n, wantTotal int, want ...string) {
		t.Helper()
		turn, total, err := tb.BeginAfter(ctx, nil, n)
		if err != nil {
			t.Fatal(err)
		}
		defer turn.End()
		var got []string
		for _, ev := range turn.History() {
			got = append(got, fmt.Sprint(ev.Message))
		}
		if total != wantTotal || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("after %d: %v of %d, want %v of %d", n, got, total, want, wantTotal)
		}
		if err := turn.Append(msg(99)); err != nil { // the turn goes on as any
			t.Fatal(err)
		}
	}
	check(3, 5, "m3", "m4")
	check(5, 6, "m99") // appended by the check before
	check(7, 7)
	check(0, 8, "m0", "m1", "m2", "m3", "m4", "m99", "m99", "m99")
	if _, err := conv.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if err := state.Append(ctx, conv, msg(7)); err != nil {
		t.Fatal(err)
	}
	check(8, 1, "m7")
}
