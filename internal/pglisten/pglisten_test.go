package pglisten

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/nbots/nb/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// database is a new test database: the listener's configuration, named
// app (so that a test can find its connection and kill it), and a
// connection of the test's own to notify with and kill from.
func database(t *testing.T, ctx context.Context, app string) (*pgconn.Config, *pgx.Conn) {
	t.Helper()
	url := pgtest.New(t)
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["application_name"] = app
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return cfg, conn
}

// TestListen: the payloads come in order; when the listening connection
// is killed, lost is told and a new connection listens again.
func TestListen(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, conn := database(t, ctx, "pglisten test")

	got := make(chan string, 16)
	lost := make(chan error, 16)
	lctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Listen(lctx, cfg, "Chan_1", 10*time.Millisecond, func(p string) { got <- p }, func(err error) { lost <- err })
	}()
	// notify sends payloads until one arrives (the LISTEN may not be in
	// place yet), then the rest, which must come in order.
	notify := func(first string, rest ...string) {
		t.Helper()
		for {
			if _, err := conn.Exec(ctx, "SELECT pg_notify('Chan_1', $1)", first); err != nil {
				t.Fatal(err)
			}
			select {
			case p := <-got:
				if p != first {
					t.Fatalf("payload %q, want %q", p, first)
				}
			case <-time.After(20 * time.Millisecond):
				continue
			case <-ctx.Done():
				t.Fatal("no notification came")
			}
			break
		}
		for len(got) > 0 { // repeats of first
			if p := <-got; p != first {
				t.Fatalf("payload %q, want %q", p, first)
			}
		}
		for _, r := range rest {
			if _, err := conn.Exec(ctx, "SELECT pg_notify('Chan_1', $1)", r); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range rest {
			select {
			case p := <-got:
				if p != r {
					t.Fatalf("payload %q, want %q", p, r)
				}
			case <-ctx.Done():
				t.Fatalf("payload %q never came", r)
			}
		}
	}
	notify("a", "b", "c")
	if len(lost) > 0 {
		t.Fatalf("lost called with the connection up: %v", <-lost)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'pglisten test'"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-lost:
		if err == nil {
			t.Error("lost called with no error")
		}
	case <-ctx.Done():
		t.Fatal("lost not called after the connection was killed")
	}
	notify("d", "e")
	stop()
	<-done
}

// TestWatchListening: Listening is called once the LISTEN is in place,
// so that a notification sent after it is never missed, and again once
// a new connection listens after the first was killed.
func TestWatchListening(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg, conn := database(t, ctx, "pglisten watch test")
	got := make(chan string, 16)
	listening := make(chan struct{}, 16)
	lctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Watch(lctx, cfg, "chan_w", 10*time.Millisecond, Callbacks{
			Listening: func() { listening <- struct{}{} },
			Notify:    func(p string) { got <- p },
		})
	}()
	defer func() { stop(); <-done }()
	for _, round := range []string{"first", "after a reconnection"} {
		select {
		case <-listening:
		case <-ctx.Done():
			t.Fatalf("%s: Listening not called", round)
		}
		if _, err := conn.Exec(ctx, "SELECT pg_notify('chan_w', $1)", round); err != nil {
			t.Fatal(err)
		}
		select {
		case p := <-got:
			if p != round {
				t.Fatalf("payload %q, want %q", p, round)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: a notification sent after Listening was missed", round)
		}
		if _, err := conn.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'pglisten watch test'"); err != nil {
			t.Fatal(err)
		}
	}
}

func TestIdentifier(t *testing.T) {
	for in, want := range map[string]string{
		"nb_state_free": `"nb_state_free"`,
		"Chan_1":        `"Chan_1"`,
		`a"b`:           `"a""b"`,
		"a\x00b":        `"ab"`,
		"":              `""`,
	} {
		if got := Identifier(in); got != want {
			t.Errorf("Identifier(%q) = %s, want %s", in, got, want)
		}
	}
}
