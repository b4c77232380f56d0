package fileruns_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbots/nb/pipeline/runstore"
	"github.com/nbots/nb/pipeline/runstore/fileruns"
)

// TestAnswerPoll: an answer another process wrote in the run's answers
// folder (no wake reaches this process) wakes Answered at the next
// AnswerPoll, not before; Answers has it. With nothing in the folder, a
// poll wakes nobody.
func TestAnswerPoll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		s, err := fileruns.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.Create(ctx, runstore.Info{ID: "polled", Name: "F", Source: []byte("digraph F {}")})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Release()
		woken := func() bool {
			synctest.Wait()
			select {
			case <-r.Answered():
				return true
			default:
				return false
			}
		}
		r.Answered() // the polls start
		time.Sleep(3 * fileruns.AnswerPoll)
		if woken() {
			t.Fatal("woken with no answer")
		}
		dir := filepath.Join(s.Dir("polled"), fileruns.AnswersDir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "00000000000000000001-other.json"), []byte(`{"from":"elsewhere"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		time.Sleep(fileruns.AnswerPoll - time.Millisecond)
		if woken() {
			t.Fatal("woken before the poll")
		}
		time.Sleep(time.Millisecond)
		if !woken() {
			t.Fatalf("not woken at the poll, %v after the answer was written", fileruns.AnswerPoll)
		}
		if got, err := r.Answers(ctx); err != nil || len(got) != 1 || string(got[0]) != `{"from":"elsewhere"}` {
			t.Fatalf("Answers = %q, %v", got, err)
		}
	})
}
