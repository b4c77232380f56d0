package pgtest

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { Main(m) }

// TestNew starts the cluster and gives two tests' worth of databases
// that are apart from each other.
func TestNew(t *testing.T) {
	ctx := context.Background()
	a, b := New(t), New(t)
	if a == b {
		t.Fatalf("two databases share a URL: %s", a)
	}
	conn, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE x (v int)"); err != nil {
		t.Fatal(err)
	}
	var fsync string
	if err := conn.QueryRow(ctx, "SHOW fsync").Scan(&fsync); err != nil || fsync != "off" {
		t.Fatalf("fsync = %q, %v; want off for tests", fsync, err)
	}
	conn2, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close(ctx)
	if _, err := conn2.Exec(ctx, "SELECT * FROM x"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("the second database sees the first's table: %v", err)
	}
	c := Shared(t)
	if !strings.Contains(a, c.Password()) {
		t.Fatalf("URL %s lacks the password", a)
	}
	if err := c.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"); err != nil {
		t.Fatal(err)
	}
}
