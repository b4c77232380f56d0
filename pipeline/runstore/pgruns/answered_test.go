package pgruns_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/nbots/nb/internal/pgtest"
	"github.com/nbots/nb/pipeline/runstore"
	"github.com/nbots/nb/pipeline/runstore/pgruns"
)

// TestAnswerPoll: an answer left with no notification (by a replica of
// an nb that did not send one, or while the holder's listening
// connection was down) wakes the holder's Answered at its next
// AnswerPoll, not before.
func TestAnswerPoll(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const poll = 1500 * time.Millisecond
	r, conn := heldRun(t, ctx, poll, "polled")
	for range 2 {
		// Just after a poll: the next is poll away.
		<-r.Answered()
		began := time.Now()
		if _, err := conn.Exec(ctx, `INSERT INTO nb_pipeline_answers (run, data) VALUES ('polled', '{"quiet":true}')`); err != nil {
			t.Fatal(err)
		}
		select {
		case <-r.Answered():
		case <-ctx.Done():
			t.Fatal("an answer left without a notification never woke Answered")
		}
		if d := time.Since(began); d < poll/2 {
			t.Errorf("woken after %v, before the next poll (every %v)", d, poll)
		}
		if got, err := r.Answers(ctx); err != nil || len(got) != 1 || string(got[0]) != `{"quiet":true}` {
			t.Fatalf("Answers = %q, %v", got, err)
		}
	}
}

// TestAnswerWhileNotListening: an answer left while the holder's
// listening connection was down (killed here) has no notification that
// reaches it; the holder's Answered is woken once the connection listens
// again, not at the next poll (an hour away).
func TestAnswerWhileNotListening(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, conn := heldRun(t, ctx, time.Hour, "unheard")
	var killed int
	if err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN %' AND pid <> pg_backend_pid()`).Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("killed %d listening connections, %v; want 1", killed, err)
	}
	// The store listens again after a second: this answer's notification,
	// had it one, would reach nobody.
	if _, err := conn.Exec(ctx, `INSERT INTO nb_pipeline_answers (run, data) VALUES ('unheard', '{"unheard":true}')`); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.Answered():
	case <-time.After(20 * time.Second):
		t.Fatal("an answer left while the store did not listen never woke Answered")
	}
	if got, err := r.Answers(ctx); err != nil || len(got) != 1 || string(got[0]) != `{"unheard":true}` {
		t.Fatalf("Answers = %q, %v", got, err)
	}
}

// heldRun is run id created in a store of a new test database whose
// holder looks for answers left without a notification every poll, and
// a connection of the test's own to that database.
func heldRun(t *testing.T, ctx context.Context, poll time.Duration, id string) (runstore.Run, *pgx.Conn) {
	t.Helper()
	url := pgtest.New(t)
	s, err := pgruns.Open(ctx, url, pgruns.Options{LeaseTTL: testTTL, AnswerPoll: poll})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	r, err := s.Create(ctx, runstore.Info{ID: id, Name: "F", Source: []byte("digraph F {}")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Release() })
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return r, conn
}
