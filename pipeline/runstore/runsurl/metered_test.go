package runsurl

import (
	"context"
	"errors"
	"testing"

	"github.com/nbots/nb/internal/metric/metrictest"
	"github.com/nbots/nb/internal/pgtest"
	"github.com/nbots/nb/pipeline/runstore"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// A run store set by URL counts each of its operations, by backend and
// op, exactly once; an answer (no such run) is not a failure, a refused
// id is.
func TestRunStoreOpsCounted(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, c := range []struct{ backend, url string }{
		{"files", "file://" + dir},
		{"postgres", pgtest.New(t)},
	} {
		t.Run(c.backend, func(t *testing.T) {
			s, err := Open(ctx, c.url, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got, want := s.Dir("r1"), map[string]string{"files": dir + "/r1", "postgres": ""}[c.backend]; got != want {
				t.Errorf("Dir: %q, want %q", got, want)
			}
			before := metrictest.Read(t)
			r, err := s.Create(ctx, runstore.Info{ID: "r1", Name: "g", File: "g.dot", Source: []byte("digraph g {}")})
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if err := r.Append([]byte(`{"e":1}`)); err != nil {
					t.Fatal(err)
				}
			}
			if err := r.Save(runstore.Checkpoint{Data: []byte(`{}`), Node: "a"}); err != nil {
				t.Fatal(err)
			}
			if err := s.Answer(ctx, "r1", []byte(`"yes"`)); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Answers(ctx); err != nil {
				t.Fatal(err)
			}
			if err := r.Release(); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Events(ctx, "r1", 0, 0); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Get(ctx, "r1"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Take(ctx, "never"); !errors.Is(err, runstore.ErrUnknown) {
				t.Fatalf("Take of no run: %v", err)
			}
			if _, err := s.Create(ctx, runstore.Info{ID: "../bad"}); err == nil {
				t.Fatal("a bad id was created")
			}
			after := metrictest.Read(t)
			for op, want := range map[string]float64{"create": 2, "append": 2, "save": 1, "answer": 1, "answers": 1, "release": 1, "events": 1, "get": 1, "take": 1} {
				series := `nb_store_op_duration_seconds_count{store="runs",backend="` + c.backend + `",op="` + op + `"}`
				if got := metrictest.Delta(before, after, series); got != want {
					t.Errorf("%s: %v, want %v", series, got, want)
				}
			}
			errs := `nb_store_op_errors_total{store="runs",backend="` + c.backend + `"`
			if got := after.Sum(errs) - before.Sum(errs); got != 1 {
				t.Errorf("%v errors, want 1 (the bad id)", got)
			}
			if got := metrictest.Delta(before, after, errs+`,op="create"}`); got != 1 {
				t.Errorf("create errors %v, want 1", got)
			}
		})
	}
}
