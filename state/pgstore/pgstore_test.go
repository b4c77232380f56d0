package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/nbots/nb/internal/pgtest"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/state/pgstore"
)

var bot = state.Bot{Author: "Tests", Name: "PG", Version: "1.0"}

func ctxOf(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func exec(t *testing.T, dbURL, sql string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func messages(events []state.Event) string {
	var out []string
	for _, e := range events {
		out = append(out, fmt.Sprint(e.Message))
	}
	return strings.Join(out, ",")
}

// noSecret fails when text shows the password.
func noSecret(t *testing.T, what, text, password string) {
	t.Helper()
	if strings.Contains(text, password) {
		t.Errorf("%s shows the password: %s", what, text)
	}
}

// TestPartition cuts one replica off the database (its role may no
// longer log in and its connections are terminated, as a network
// partition would leave it): its open turn's Append fails with ErrLost
// and a reason, it takes no new work and answers nothing from what it
// read before; the other replica takes the conversation over once the
// lease expired; healed, the cut-off replica's old turns stay lost and
// its new ones see the other's events.
func TestPartition(t *testing.T) {
	ctx := ctxOf(t)
	dbURL, open := opener(t, testTTL)
	b := open("") // the replica that stays connected; it creates the schema
	u, _ := url.Parse(dbURL)
	db := strings.TrimPrefix(u.Path, "/")
	role := "replica_" + db
	const password = "replica-secret-Zq9"
	cluster := pgtest.Shared(t)
	if err := cluster.Exec(ctx, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", role, password)); err != nil {
		t.Fatal(err)
	}
	exec(t, dbURL, "GRANT ALL ON ALL TABLES IN SCHEMA public TO "+role+"; GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO "+role)
	au := *u
	au.User = url.UserPassword(role, password)
	a, err := pgstore.Open(ctx, au.String(), pgstore.Options{LeaseTTL: testTTL})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	ac, _ := a.Open(bot, "u", "talking")
	talking, err := ac.Begin(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer talking.End()
	if err := talking.Append(state.Event{Who: state.RoleUser, Message: "before"}); err != nil {
		t.Fatal(err)
	}
	ac2, _ := a.Open(bot, "u", "idle")
	idle, err := ac2.Begin(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.End()
	if err := idle.Append(state.Event{Who: state.RoleUser, Message: "before"}); err != nil {
		t.Fatal(err)
	}

	// The partition.
	if err := cluster.Exec(ctx, "ALTER ROLE "+role+" NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role); err != nil {
		t.Fatal(err)
	}
	err = talking.Append(state.Event{Who: state.RoleAI, Message: "during"})
	if !errors.Is(err, state.ErrLost) || !strings.Contains(err.Error(), a.Place()) {
		t.Fatalf("Append during the partition: %v; want ErrLost naming %s", err, a.Place())
	}
	noSecret(t, "Append's error", err.Error(), password)
	t.Log(err)
	if err := a.Ping(ctx); err == nil {
		t.Error("Ping succeeded during the partition")
	} else {
		noSecret(t, "Ping's error", err.Error(), password)
		t.Log(err)
	}
	other, _ := a.Open(bot, "u", "new")
	if turn, err := other.Begin(ctx, nil); err == nil || errors.Is(err, state.ErrBusy) {
		if err == nil {
			turn.End()
		}
		t.Errorf("Begin during the partition: %v; want an error", err)
	} else {
		noSecret(t, "Begin's error", err.Error(), password)
	}
	if h, err := ac.History(ctx); err == nil {
		t.Errorf("History during the partition answered %q", messages(h))
	}

	// The other replica takes both conversations over once their leases
	// expired.
	for _, key := range []string{"talking", "idle"} {
		c, _ := b.Open(bot, "u", key)
		start := time.Now()
		turn, err := c.Begin(ctx, func() {})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s taken over after %v", key, time.Since(start).Round(time.Millisecond))
		if got := messages(turn.History()); got != "before" {
			t.Errorf("%s: the new holder began with %q", key, got)
		}
		if err := turn.Append(state.Event{Who: state.RoleAI, Message: "after"}); err != nil {
			t.Fatal(err)
		}
		turn.End()
	}

	// Healed.
	if err := cluster.Exec(ctx, "ALTER ROLE "+role+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	if err := a.Ping(ctx); err != nil {
		t.Fatalf("after the partition: %v", err)
	}
	for name, turn := range map[string]state.Turn{"talking": talking, "idle": idle} {
		if err := turn.Append(state.Event{Who: state.RoleAI, Message: "stale"}); !errors.Is(err, state.ErrLost) {
			t.Errorf("%s: the old turn's Append after the partition: %v; want ErrLost", name, err)
		}
	}
	for _, c := range []state.Conversation{ac, ac2} {
		turn, err := c.Begin(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := messages(turn.History()); got != "before,after" {
			t.Errorf("after the partition %s holds %q", c.Location(), got)
		}
		turn.End()
	}
}

// TestCredentials: the password of the URL is in no location, where and
// error.
func TestCredentials(t *testing.T) {
	ctx := ctxOf(t)
	dbURL, open := opener(t, testTTL)
	u, _ := url.Parse(dbURL)
	password, _ := u.User.Password()
	s := open("pw")
	where, _ := s.Location(bot)
	c, _ := s.Open(bot, "u", "k")
	turn, err := c.Begin(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := turn.KeepOutput("call/1", "text")
	if err != nil {
		t.Fatal(err)
	}
	turn.End()
	for _, text := range []string{where, c.Location(), c.HistoryLocation(), kept, s.Place()} {
		noSecret(t, "a location", text, password)
		if strings.Contains(text, "nb@") || !strings.HasPrefix(text, "postgres://127.0.0.1:") {
			t.Errorf("location %q", text)
		}
	}
	if want := s.Place() + ", conversation tests/pg/1-0/"; !strings.HasPrefix(c.Location(), want) || !strings.HasSuffix(kept, ", output call_1") {
		t.Errorf("locations %q, %q", c.Location(), kept)
	}
	wrong := *u
	wrong.User = url.UserPassword("nb", password+"x")
	if _, err := pgstore.Open(ctx, wrong.String(), pgstore.Options{}); err == nil {
		t.Error("opened with a wrong password")
	} else {
		noSecret(t, "Open's error", err.Error(), password)
	}
}

// TestMigrations: replicas opening one database together create the
// schema once; a schema newer than this nb is refused with a clear error.
func TestMigrations(t *testing.T) {
	ctx := ctxOf(t)
	dbURL := pgtest.New(t)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := pgstore.Open(ctx, dbURL, pgstore.Options{})
			if err != nil {
				t.Error(err)
				return
			}
			s.Close()
		}()
	}
	wg.Wait()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var versions int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM nb_state_migrations").Scan(&versions); err != nil || versions != 1 {
		t.Fatalf("%d versions recorded, %v", versions, err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO nb_state_migrations (version) VALUES (99)"); err != nil {
		t.Fatal(err)
	}
	if _, err := pgstore.Open(ctx, dbURL, pgstore.Options{}); err == nil || !strings.Contains(err.Error(), "version 99, newer than this nb knows") {
		t.Errorf("Open on a newer schema: %v", err)
	}
}

// TestRenewal: a turn longer than its lease's TTL keeps the
// conversation: the lease is renewed in the background.
func TestRenewal(t *testing.T) {
	ctx := ctxOf(t)
	_, open := opener(t, time.Second)
	c, _ := open("").Open(bot, "u", "long")
	turn, err := c.Begin(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer turn.End()
	time.Sleep(2500 * time.Millisecond)
	other, _ := open("").Open(bot, "u", "long")
	if _, err := other.Begin(ctx, nil); !errors.Is(err, state.ErrBusy) {
		t.Fatalf("another Begin during a long turn: %v, want ErrBusy", err)
	}
	if err := turn.Append(state.Event{Who: state.RoleAI, Message: "late answer"}); err != nil {
		t.Fatal(err)
	}
}
