package pgpool

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrRolledBack is BeginFunc's error when COMMIT rolled the
// transaction back, a statement in it having failed.
var ErrRolledBack = errors.New("the transaction was rolled back: a statement in it failed")

// ErrNoRows is what Row.Scan says when the statement returned no row.
var ErrNoRows = errors.New("no rows in result set")

// Rows is a statement's result, read whole (the connection went back to
// the pool before the caller reads it).
type Rows struct {
	fields []pgconn.FieldDescription
	rows   [][][]byte
	next   int
	err    error
}

// Next moves to the next row, false after the last one or an error of
// Scan.
func (r *Rows) Next() bool {
	if r.err != nil || r.next >= len(r.rows) {
		return false
	}
	r.next++
	return true
}

// Scan decodes the current row into dst, one destination a column (see
// scanRow for the types).
func (r *Rows) Scan(dst ...any) error {
	if r.next == 0 || r.next > len(r.rows) {
		return errors.New("Scan called without a row")
	}
	if err := scanRow(r.fields, r.rows[r.next-1], dst); err != nil {
		r.err = err
		return err
	}
	return nil
}

// Err is the error of the last Scan, if any.
func (r *Rows) Err() error { return r.err }

// Close does nothing: the result is in memory. It is there so that the
// rows read like database/sql's and pgx's.
func (r *Rows) Close() {}

// Len is the number of rows.
func (r *Rows) Len() int { return len(r.rows) }

// Columns is the number of columns.
func (r *Rows) Columns() int { return len(r.fields) }

// Column reads rows of one column into a slice of T (a type Rows.Scan
// takes).
func Column[T any](rows *Rows, err error) ([]T, error) {
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, rows.Len())
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// Row is the first row of a statement's result.
type Row struct {
	rows *Rows
	err  error
}

// Scan decodes the first row into dst; ErrNoRows when there is none.
func (r *Row) Scan(dst ...any) error {
	if r.err != nil {
		return r.err
	}
	if !r.rows.Next() {
		return ErrNoRows
	}
	return r.rows.Scan(dst...)
}

// result makes Rows of a statement's result.
func result(res *pgconn.Result) (*Rows, error) {
	if res.Err != nil {
		return nil, res.Err
	}
	return &Rows{fields: res.FieldDescriptions, rows: res.Rows}, nil
}

// maxStatements is how many statements a connection keeps prepared;
// past it, statements are sent unprepared. nb's stores have a fixed set
// of a few dozen.
const maxStatements = 256

// prepared returns the name of sql prepared on the connection for
// parameters of the types oids, preparing it the first time (one round
// trip): as pgx's default statement cache does, the server parses and
// plans each statement once a connection rather than at every
// execution, which made a store's operations half again as slow. ""
// when the connection keeps as many statements as it may.
func (c *Conn) prepared(ctx context.Context, sql string, oids []uint32) (key, name string, err error) {
	key = statementKey(sql, oids)
	if name, ok := c.stmts[key]; ok {
		return key, name, nil
	}
	if len(c.stmts) >= maxStatements {
		return key, "", nil
	}
	c.prepares++
	name = "nb_" + strconv.Itoa(c.prepares)
	if _, err := c.pg.Prepare(ctx, name, sql, oids); err != nil {
		c.fail(err)
		return key, "", err
	}
	if c.stmts == nil {
		c.stmts = map[string]string{}
	}
	c.stmts[key] = name
	return key, name, nil
}

// statementKey is sql and its parameters' types, which a prepared
// statement is fixed to.
func statementKey(sql string, oids []uint32) string {
	b := make([]byte, 0, len(sql)+1+4*len(oids))
	b = append(append(b, sql...), 0)
	for _, o := range oids {
		b = binary.BigEndian.AppendUint32(b, o)
	}
	return string(b)
}

// stale reports whether err says a prepared statement no longer fits
// (the schema changed under it: "cached plan must not change result
// type") or is gone from the server.
func stale(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "0A000" || pgErr.Code == "26000")
}

// exec runs one statement on the connection, prepared.
func (c *Conn) exec(ctx context.Context, sql string, args []any) *pgconn.Result {
	p, err := encode(args)
	if err != nil {
		return &pgconn.Result{Err: err}
	}
	key, name, err := c.prepared(ctx, sql, p.oids)
	if err != nil {
		return &pgconn.Result{Err: err}
	}
	if name == "" {
		res := c.pg.ExecParams(ctx, sql, p.values, p.oids, p.formats, binaryResults).Read()
		c.fail(res.Err)
		return res
	}
	res := c.pg.ExecPrepared(ctx, name, p.values, p.formats, binaryResults).Read()
	if stale(res.Err) {
		delete(c.stmts, key) // prepared again on the schema as it is, next time
		if c.pg.TxStatus() == 'I' {
			// Outside a transaction the statement did nothing: it is
			// sent again, unprepared.
			res = c.pg.ExecParams(ctx, sql, p.values, p.oids, p.formats, binaryResults).Read()
		}
	}
	c.fail(res.Err)
	return res
}

// execSimple runs sql, which may be several statements, without
// parameters (the simple protocol, results as text); the result is the
// last statement's.
func (c *Conn) execSimple(ctx context.Context, sql string) *pgconn.Result {
	results, err := c.pg.Exec(ctx, sql).ReadAll()
	c.fail(err)
	if err != nil {
		return &pgconn.Result{Err: err}
	}
	if len(results) == 0 {
		return &pgconn.Result{}
	}
	return results[len(results)-1]
}

// Exec runs a statement and returns its command tag (RowsAffected).
// Without arguments sql may be several statements (a schema).
func (c *Conn) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	var res *pgconn.Result
	if len(args) == 0 {
		res = c.execSimple(ctx, sql)
	} else {
		res = c.exec(ctx, sql, args)
	}
	return res.CommandTag, res.Err
}

// Query runs a statement and returns its rows.
func (c *Conn) Query(ctx context.Context, sql string, args ...any) (*Rows, error) {
	return result(c.exec(ctx, sql, args))
}

// QueryRow runs a statement for its first row.
func (c *Conn) QueryRow(ctx context.Context, sql string, args ...any) *Row {
	rows, err := c.Query(ctx, sql, args...)
	return &Row{rows: rows, err: err}
}

// with runs f on a connection of the pool.
func (p *Pool) with(ctx context.Context, f func(*Conn) *pgconn.Result) *pgconn.Result {
	c, err := p.Acquire(ctx)
	if err != nil {
		return &pgconn.Result{Err: err}
	}
	defer c.Release()
	return f(c)
}

// Exec runs a statement on a connection of the pool, as Conn.Exec does.
func (p *Pool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	res := p.with(ctx, func(c *Conn) *pgconn.Result {
		if len(args) == 0 {
			return c.execSimple(ctx, sql)
		}
		return c.exec(ctx, sql, args)
	})
	return res.CommandTag, res.Err
}

// Query runs a statement on a connection of the pool and returns its
// rows.
func (p *Pool) Query(ctx context.Context, sql string, args ...any) (*Rows, error) {
	return result(p.with(ctx, func(c *Conn) *pgconn.Result { return c.exec(ctx, sql, args) }))
}

// QueryRow runs a statement on a connection of the pool for its first
// row.
func (p *Pool) QueryRow(ctx context.Context, sql string, args ...any) *Row {
	rows, err := p.Query(ctx, sql, args...)
	return &Row{rows: rows, err: err}
}

// Batch is statements sent together in one round trip. They run in one
// implicit transaction: the first that fails undoes those before it and
// skips those after.
type Batch struct {
	items []batchItem
}

type batchItem struct {
	sql  string
	args []any
}

// Queue adds a statement.
func (b *Batch) Queue(sql string, args ...any) { b.items = append(b.items, batchItem{sql, args}) }

// Len is the number of statements queued.
func (b *Batch) Len() int { return len(b.items) }

// BatchResults are a batch's results, read in the order of the
// statements.
type BatchResults struct {
	results []*pgconn.Result
	err     error // the batch's first error
	next    int
}

// SendBatch runs the batch on a connection of the pool and reads all
// its results.
func (p *Pool) SendBatch(ctx context.Context, b *Batch) *BatchResults {
	c, err := p.Acquire(ctx)
	if err != nil {
		return &BatchResults{err: err}
	}
	defer c.Release()
	return c.SendBatch(ctx, b)
}

// SendBatch runs the batch on the connection and reads all its results.
func (c *Conn) SendBatch(ctx context.Context, b *Batch) *BatchResults {
	return c.sendBatch(ctx, b, false)
}

// sendBatch is SendBatch, sent once more after stale statements unless
// retried.
func (c *Conn) sendBatch(ctx context.Context, b *Batch, retried bool) *BatchResults {
	var pb pgconn.Batch
	keys := make([]string, 0, len(b.items))
	for i, it := range b.items {
		p, err := encode(it.args)
		if err != nil {
			return &BatchResults{err: fmt.Errorf("statement %d of the batch: %w", i+1, err)}
		}
		key, name, err := c.prepared(ctx, it.sql, p.oids)
		if err != nil {
			return &BatchResults{err: err}
		}
		keys = append(keys, key)
		if name == "" {
			pb.ExecParams(it.sql, p.values, p.oids, p.formats, binaryResults)
		} else {
			pb.ExecPrepared(name, p.values, p.formats, binaryResults)
		}
	}
	results, err := c.pg.ExecBatch(ctx, &pb).ReadAll()
	if stale(err) {
		// The batch ran as one transaction, undone: its statements are
		// prepared again and it is sent once more.
		for _, k := range keys {
			delete(c.stmts, k)
		}
		if c.pg.TxStatus() == 'I' && !retried {
			return c.sendBatch(ctx, b, true)
		}
	}
	c.fail(err)
	return &BatchResults{results: results, err: err}
}

// take returns the next statement's result.
func (br *BatchResults) take() *pgconn.Result {
	i := br.next
	br.next++
	if i < len(br.results) {
		return br.results[i]
	}
	if br.err != nil {
		return &pgconn.Result{Err: br.err}
	}
	return &pgconn.Result{Err: fmt.Errorf("the batch has no statement %d", i+1)}
}

// Exec returns the next statement's command tag.
func (br *BatchResults) Exec() (pgconn.CommandTag, error) {
	res := br.take()
	return res.CommandTag, res.Err
}

// Query returns the next statement's rows.
func (br *BatchResults) Query() (*Rows, error) { return result(br.take()) }

// QueryRow returns the next statement's first row.
func (br *BatchResults) QueryRow() *Row {
	rows, err := br.Query()
	return &Row{rows: rows, err: err}
}

// Close returns the batch's first error, nil when every statement
// succeeded.
func (br *BatchResults) Close() error { return br.err }

// Tx is a transaction on one connection.
type Tx struct {
	c *Conn
}

// Exec runs a statement in the transaction.
func (tx *Tx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return tx.c.Exec(ctx, sql, args...)
}

// Query runs a statement in the transaction and returns its rows.
func (tx *Tx) Query(ctx context.Context, sql string, args ...any) (*Rows, error) {
	return tx.c.Query(ctx, sql, args...)
}

// QueryRow runs a statement in the transaction for its first row.
func (tx *Tx) QueryRow(ctx context.Context, sql string, args ...any) *Row {
	return tx.c.QueryRow(ctx, sql, args...)
}

// BeginFunc runs f in a transaction on one connection: BEGIN, f, then
// COMMIT when f returns nil, ROLLBACK otherwise (and when f panics; the
// panic goes on). The error is f's, or the commit's.
func (p *Pool) BeginFunc(ctx context.Context, f func(*Tx) error) (err error) {
	c, err := p.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release() // a connection left in the transaction is closed
	if _, err := c.Exec(ctx, "BEGIN"); err != nil {
		return err
	}
	committed := false
	defer func() {
		if committed {
			return
		}
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Exec(rctx, "ROLLBACK") //nolint:errcheck // a connection it fails on is closed
	}()
	if err := f(&Tx{c: c}); err != nil {
		return err
	}
	committed = true
	tag, err := c.Exec(ctx, "COMMIT")
	switch {
	case err != nil:
		return err
	case tag.String() == "ROLLBACK": // a statement in it failed and f did not say
		return ErrRolledBack
	}
	return nil
}
