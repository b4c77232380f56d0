package storeurl

import (
	"context"
	"fmt"
	"testing"

	"github.com/nbots/nb/internal/metric/metrictest"
	"github.com/nbots/nb/internal/pgtest"
	"github.com/nbots/nb/state"
)

// A store set by URL counts each of its operations, by backend and op,
// exactly once, and its failures; a conversation of a store that begins
// after a known history (PostgreSQL's) still does through the counting.
func TestStoreOpsCounted(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ backend, url string }{
		{"files", "file://" + t.TempDir()},
		{"postgres", pgtest.New(t)},
	} {
		t.Run(c.backend, func(t *testing.T) {
			s, err := Open(ctx, c.url, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			before := metrictest.Read(t)
			conv, err := s.Open(state.Bot{Author: "a", Name: "b"}, "u", "k")
			if err != nil {
				t.Fatal(err)
			}
			turn, err := conv.Begin(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if err := turn.Append(state.Event{Who: state.RoleUser, Message: fmt.Sprint("m", i)}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := turn.KeepOutput("call_1", "out"); err != nil {
				t.Fatal(err)
			}
			turn.End()
			for range 2 {
				if _, err := conv.History(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := conv.Output(ctx, "no_such_call"); err == nil {
				t.Fatal("an output never kept was read")
			}
			if _, err := s.List(ctx, state.Bot{Author: "a", Name: "b"}); err != nil {
				t.Fatal(err)
			}
			_, tail := conv.(state.TailBeginner)
			if tail != (c.backend == "postgres") {
				t.Errorf("TailBeginner %v through the counting", tail)
			}
			if _, err := conv.Delete(ctx); err != nil {
				t.Fatal(err)
			}
			after := metrictest.Read(t)
			for op, want := range map[string]float64{"begin": 1, "append": 3, "keep_output": 1, "history": 2, "output": 1, "list": 1, "delete": 1} {
				series := `nb_store_op_duration_seconds_count{store="conversations",backend="` + c.backend + `",op="` + op + `"}`
				if got := metrictest.Delta(before, after, series); got != want {
					t.Errorf("%s: %v, want %v", series, got, want)
				}
			}
			if got := after.Sum(`nb_store_op_errors_total{store="conversations",backend="`+c.backend+`"`) - before.Sum(`nb_store_op_errors_total{store="conversations",backend="`+c.backend+`"`); got != 1 {
				t.Errorf("%v errors, want 1 (the output never kept)", got)
			}
			if got := metrictest.Delta(before, after, `nb_store_op_errors_total{store="conversations",backend="`+c.backend+`",op="output"}`); got != 1 {
				t.Errorf("output errors %v, want 1", got)
			}
		})
	}
}
