package pgpool_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/nbots/nb/internal/pgpool"
	"github.com/nbots/nb/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// open is a pool on a new test database (params added to its URL),
// and the database's URL.
func open(t *testing.T, params string) (*pgpool.Pool, string) {
	t.Helper()
	url := pgtest.New(t)
	cfg, err := pgpool.ParseConfig(url + params)
	if err != nil {
		t.Fatal(err)
	}
	p := pgpool.New(cfg)
	t.Cleanup(p.Close)
	return p, url
}

// withSchema is a pool on a new test database (params added to its URL)
// where ddl ran, and the test's context.
func withSchema(t *testing.T, params, ddl string) (context.Context, *pgpool.Pool) {
	t.Helper()
	ctx := ctxOf(t)
	p, _ := open(t, params)
	if _, err := p.Exec(ctx, ddl); err != nil {
		t.Fatal(err)
	}
	return ctx, p
}

func ctxOf(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestRoundTrip: each type the stores send comes back as sent, through
// the server's own binary forms; NULLs as nil; jsonb without its version.
func TestRoundTrip(t *testing.T) {
	ctx := ctxOf(t)
	p, _ := open(t, "")
	at := time.Date(2026, 11, 30, 1, 2, 3, 456789000, time.UTC)
	var (
		s       string
		b, null []byte
		ok      bool
		n       int64
		small   int16
		tm      time.Time
		d       time.Duration
		f       float64
		js      string
		nt      *time.Time
		ns      *string
	)
	err := p.QueryRow(ctx, `SELECT $1::text, $2::bytea, $3, $4::bigint + 1, $5::smallint, $6::timestamptz, $7::interval, $8::float8,
			'{"b": [1, 2]}'::jsonb, $9::bytea, $10::timestamptz, $11::text`,
		"é\tx", []byte{0, 255}, true, int64(1<<40), int16(-3), at, 90*time.Second, 0.25, nil, (*time.Time)(nil), nil).
		Scan(&s, &b, &ok, &n, &small, &tm, &d, &f, &js, &null, &nt, &ns)
	if err != nil {
		t.Fatal(err)
	}
	if s != "é\tx" || string(b) != "\x00\xff" || !ok || n != 1<<40+1 || small != -3 || !tm.Equal(at) || d != 90*time.Second || f != 0.25 ||
		js != `{"b": [1, 2]}` || null != nil || nt != nil || ns != nil {
		t.Errorf("got %q % x %v %d %d %v %v %v %q %v %v %v", s, b, ok, n, small, tm, d, f, js, null, nt, ns)
	}
	// Arrays go in whole.
	strs, err := pgpool.Column[string](p.Query(ctx, `SELECT u FROM unnest($1::text[]) AS u`, []string{"a", "", "c"}))
	if err != nil || strings.Join(strs, ",") != "a,,c" {
		t.Errorf("text[]: %q, %v", strs, err)
	}
	bs, err := pgpool.Column[[]byte](p.Query(ctx, `SELECT u FROM unnest($1::bytea[]) AS u`, [][]byte{{1}, {}}))
	if err != nil || len(bs) != 2 || string(bs[0]) != "\x01" || len(bs[1]) != 0 {
		t.Errorf("bytea[]: %v, %v", bs, err)
	}
	// A string parameter takes the type its place calls for.
	var sum int64
	if err := p.QueryRow(ctx, `SELECT $1 + 1`, int64(41)).Scan(&sum); err != nil || sum != 42 {
		t.Errorf("%d, %v", sum, err)
	}
	var id int
	if err := p.QueryRow(ctx, `SELECT x FROM (VALUES (1), (2)) v(x) WHERE x::text = $1`, "2").Scan(&id); err != nil || id != 2 {
		t.Errorf("%d, %v", id, err)
	}
	// A NULL where a value is needed names the column.
	err = p.QueryRow(ctx, `SELECT NULL::text AS holder`).Scan(&s)
	var ce *pgpool.ColumnError
	if !errors.As(err, &ce) || ce.Column != "holder" {
		t.Errorf("NULL into a string: %v", err)
	}
	if err := p.QueryRow(ctx, `SELECT 1 WHERE false`).Scan(&id); !errors.Is(err, pgpool.ErrNoRows) {
		t.Errorf("no row: %v", err)
	}
}

// TestServerErrors: PostgreSQL's errors come through as *pgconn.PgError
// with their SQLSTATE, and leave the connection in use.
func TestServerErrors(t *testing.T) {
	ctx, p := withSchema(t, "&pool_max_conns=1", `CREATE TABLE u (k text PRIMARY KEY)`)
	pid := backend(t, p)
	if _, err := p.Exec(ctx, `INSERT INTO u VALUES ($1)`, "a"); err != nil {
		t.Fatal(err)
	}
	_, err := p.Exec(ctx, `INSERT INTO u VALUES ($1)`, "a")
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" || !strings.Contains(err.Error(), "duplicate key") {
		t.Fatalf("unique violation: %v", err)
	}
	if got := backend(t, p); got != pid {
		t.Errorf("the connection was dropped after an error of the server (%d, then %d)", pid, got)
	}
}

func backend(t *testing.T, p *pgpool.Pool) int {
	t.Helper()
	var pid int
	if err := p.QueryRow(context.Background(), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return pid
}

// terminate ends the server's backend pid from another connection, as
// an administrator or a restart would.
func terminate(t *testing.T, url string, pid int) {
	t.Helper()
	ctx := ctxOf(t)
	other, err := pgconn.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	if _, err := other.Exec(ctx, "SELECT pg_terminate_backend("+strconv.Itoa(pid)+")").ReadAll(); err != nil {
		t.Fatal(err)
	}
}

// TestBrokenConnectionDropped: a connection the server killed fails its
// statement and is not handed out again.
func TestBrokenConnectionDropped(t *testing.T) {
	ctx := ctxOf(t)
	p, url := open(t, "&pool_max_conns=1")
	pid := backend(t, p)
	terminate(t, url, pid)
	time.Sleep(50 * time.Millisecond) // the backend's end reaches the socket
	_, err := p.Exec(ctx, "SELECT 1", 1)
	if err == nil {
		t.Log("the killed connection was noticed before the statement") // nothing to drop then
	}
	if got := backend(t, p); got == pid {
		t.Errorf("the killed connection %d is still in use", pid)
	}
}

// TestIdleConnectionChecked: an idle connection killed while idle for
// over a second is found by the check on acquiring it: the statement
// succeeds on a new one.
func TestIdleConnectionChecked(t *testing.T) {
	ctx := ctxOf(t)
	p, url := open(t, "&pool_max_conns=1")
	pid := backend(t, p)
	terminate(t, url, pid)
	time.Sleep(1100 * time.Millisecond)
	if _, err := p.Exec(ctx, "SELECT $1::int", 1); err != nil {
		t.Fatalf("the statement after an idle connection was killed: %v", err)
	}
}

// TestMaxConns: no more than MaxConns connections are handed out; one
// more waits until one is released or its context ends.
func TestMaxConns(t *testing.T) {
	ctx := ctxOf(t)
	p, _ := open(t, "&pool_max_conns=2")
	a, err := p.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := p.Acquire(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a third connection: %v, want it to wait until the deadline", err)
	}
	got := make(chan *pgpool.Conn)
	go func() {
		c, err := p.Acquire(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- c
	}()
	select {
	case <-got:
		t.Fatal("a third connection while two are held")
	case <-time.After(50 * time.Millisecond):
	}
	a.Release()
	c := <-got
	if c.PgConn() != a.PgConn() {
		t.Error("the released connection was not reused")
	}
	c.Release()
	b.Release()
}

// TestCancel: a statement whose context ends stops, says so, and the
// pool goes on working.
func TestCancel(t *testing.T) {
	ctx := ctxOf(t)
	p, _ := open(t, "&pool_max_conns=1")
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Exec(short, "SELECT pg_sleep(30)")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the cancelled statement: %v", err)
	}
	if time.Since(start) > 20*time.Second {
		t.Error("the statement was not stopped")
	}
	if _, err := p.Exec(ctx, "SELECT 1"); err != nil {
		t.Errorf("after a cancelled statement: %v", err)
	}
}

// TestBeginFunc: a transaction commits when f returns nil, rolls back
// when it returns an error or a statement in it failed, and on panic.
func TestBeginFunc(t *testing.T) {
	ctx, p := withSchema(t, "&pool_max_conns=1", `CREATE TABLE t (k text PRIMARY KEY)`)
	count := func() int {
		var n int
		if err := p.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	boom := errors.New("boom")
	err := p.BeginFunc(ctx, func(tx *pgpool.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO t VALUES ($1)`, "a"); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 1 {
			t.Errorf("inside: %d, %v", n, err)
		}
		return boom
	})
	if !errors.Is(err, boom) || count() != 0 {
		t.Errorf("f's error: %v, %d rows", err, count())
	}
	err = p.BeginFunc(ctx, func(tx *pgpool.Tx) error {
		tx.Exec(ctx, `INSERT INTO t VALUES ($1)`, "b") //nolint:errcheck
		tx.Exec(ctx, `INSERT INTO t VALUES ($1)`, "b") //nolint:errcheck // fails: the transaction is aborted
		return nil
	})
	if !errors.Is(err, pgpool.ErrRolledBack) || count() != 0 {
		t.Errorf("a failed statement f ignored: %v, %d rows", err, count())
	}
	func() {
		defer func() { recover() }()
		p.BeginFunc(ctx, func(tx *pgpool.Tx) error { //nolint:errcheck
			tx.Exec(ctx, `INSERT INTO t VALUES ($1)`, "c") //nolint:errcheck
			panic("f panics")
		})
	}()
	if count() != 0 {
		t.Error("the transaction of a panic committed")
	}
	if err := p.BeginFunc(ctx, func(tx *pgpool.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO t VALUES ($1)`, "d")
		return err
	}); err != nil || count() != 1 {
		t.Errorf("commit: %v, %d rows", err, count())
	}
}

// TestBatch: a batch is one implicit transaction: a failing statement
// undoes those before it; results come in order.
func TestBatch(t *testing.T) {
	ctx, p := withSchema(t, "", `CREATE TABLE t (k text PRIMARY KEY)`)
	var b pgpool.Batch
	b.Queue(`INSERT INTO t VALUES ($1)`, "a")
	b.Queue(`SELECT k FROM t WHERE k = $1`, "a")
	b.Queue(`INSERT INTO t VALUES ($1)`, "a")
	b.Queue(`SELECT 1`)
	br := p.SendBatch(ctx, &b)
	if tag, err := br.Exec(); err != nil || tag.RowsAffected() != 1 {
		t.Errorf("first: %v, %v", tag, err)
	}
	var k string
	if err := br.QueryRow().Scan(&k); err != nil || k != "a" {
		t.Errorf("second: %q, %v", k, err)
	}
	_, err := br.Exec()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		t.Errorf("third: %v", err)
	}
	if _, err := br.Exec(); err == nil {
		t.Error("the statement after a failure ran")
	}
	if err := br.Close(); err == nil {
		t.Error("Close hid the batch's error")
	}
	var n int
	if err := p.QueryRow(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d rows after a failed batch, %v", n, err)
	}
}

// TestClose: a closed pool refuses statements; a connection released
// after Close is closed.
func TestClose(t *testing.T) {
	ctx := ctxOf(t)
	p, _ := open(t, "")
	c, err := p.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	if _, err := p.Exec(ctx, "SELECT 1"); !errors.Is(err, pgpool.ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	c.Release()
	if !c.PgConn().IsClosed() {
		t.Error("a connection released after Close stays open")
	}
}

// TestParseConfig: the URL's pool parameters are the pool's, not sent to
// the server; pgx's that this pool has not are refused by name; the
// PG* environment is read.
func TestParseConfig(t *testing.T) {
	t.Setenv("PGAPPNAME", "from the environment")
	cfg, err := pgpool.ParseConfig("postgres://u@h/db?pool_max_conns=7&pool_max_conn_lifetime=90s&pool_max_conn_idle_time=1m&pool_health_check_period=2s&sslmode=disable")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxConns != 7 || cfg.MaxConnLifetime != 90*time.Second || cfg.MaxConnIdleTime != time.Minute || cfg.HealthCheckPeriod != 2*time.Second {
		t.Errorf("%+v", cfg)
	}
	for k := range cfg.Conn.RuntimeParams {
		if strings.HasPrefix(k, "pool_") {
			t.Errorf("%s would be sent to the server", k)
		}
	}
	if cfg.Conn.RuntimeParams["application_name"] != "from the environment" || cfg.Conn.Database != "db" {
		t.Errorf("%v %q", cfg.Conn.RuntimeParams, cfg.Conn.Database)
	}
	for q, want := range map[string]string{
		"pool_max_conns=0":            "pool_max_conns",
		"pool_max_conns=x":            "pool_max_conns",
		"pool_max_conn_lifetime=long": "pool_max_conn_lifetime",
		"pool_min_conns=2":            "pool_min_conns is not supported",
		"statement_cache_capacity=9":  "statement_cache_capacity is not supported",
	} {
		if _, err := pgpool.ParseConfig("postgres://u@h/db?" + q); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", q, err, want)
		}
	}
}

// TestStatementsPreparedOnce: a statement is prepared once a connection
// (its name in pg_prepared_statements), then executed by name, alone or
// in batches: the server does not parse and plan it at every execution.
func TestStatementsPreparedOnce(t *testing.T) {
	ctx := ctxOf(t)
	p, _ := open(t, "&pool_max_conns=1")
	for i := range 5 {
		var n int64
		if err := p.QueryRow(ctx, `SELECT $1::int8 + 1`, int64(i)).Scan(&n); err != nil || n != int64(i)+1 {
			t.Fatalf("%d: %v", n, err)
		}
		var b pgpool.Batch
		b.Queue(`SELECT $1::text`, "a")
		b.Queue(`SELECT $1::int8 * 2`, int64(i))
		if err := p.SendBatch(ctx, &b).Close(); err != nil {
			t.Fatal(err)
		}
	}
	var prepared int64
	if err := p.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_statements WHERE NOT from_sql`).Scan(&prepared); err != nil {
		t.Fatal(err)
	}
	if prepared != 4 { // the three above and this one
		t.Errorf("%d statements prepared on the connection, want 4", prepared)
	}
}

// TestStaleStatementPreparedAgain: a prepared statement whose table
// changed shape ("cached plan must not change result type") is prepared
// again, alone and in a batch, and the caller sees the new shape.
func TestStaleStatementPreparedAgain(t *testing.T) {
	ctx, p := withSchema(t, "&pool_max_conns=1", `CREATE TABLE s (a int8); INSERT INTO s VALUES (1)`)
	columns := func() (alone, batched int) {
		rows, err := p.Query(ctx, `SELECT * FROM s WHERE a = $1`, int64(1))
		if err != nil {
			t.Fatal(err)
		}
		var b pgpool.Batch
		b.Queue(`SELECT * FROM s WHERE a > $1`, int64(0))
		br := p.SendBatch(ctx, &b)
		brows, err := br.Query()
		if err != nil {
			t.Fatal(err)
		}
		return rows.Columns(), brows.Columns()
	}
	if a, b := columns(); a != 1 || b != 1 {
		t.Fatalf("%d and %d columns before", a, b)
	}
	if _, err := p.Exec(ctx, `ALTER TABLE s ADD COLUMN b int8 DEFAULT 2`); err != nil {
		t.Fatal(err)
	}
	if a, b := columns(); a != 2 || b != 2 {
		t.Errorf("%d and %d columns after the table changed, want 2", a, b)
	}
}
