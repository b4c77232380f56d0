package pgtest

import (
	"context"
	"os"
	"path/filepath"
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

// TestReapOrphans: a cluster whose test process died is stopped and
// removed by the next Start.
func TestReapOrphans(t *testing.T) {
	Shared(t) // skips without PostgreSQL
	c, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	// A pid that no process has: the highest the kernel allows is lower.
	if err := os.WriteFile(filepath.Join(c.dir, "owner"), []byte("2147483646"), 0o644); err != nil {
		t.Fatal(err)
	}
	d, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Stop()
	if _, err := os.Stat(c.dir); !os.IsNotExist(err) {
		t.Fatalf("the orphan's folder is still there: %v", err)
	}
	if err := c.Exec(context.Background(), "SELECT 1"); err == nil {
		t.Fatal("the orphan cluster still answers")
	}
}
