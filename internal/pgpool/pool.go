// Package pgpool is the pool of PostgreSQL connections nb's stores share
// a database through, on pgx's wire-level package pgconn alone: a few
// connections opened as they are needed and reused, statements with
// their parameters (ExecParams, one round trip each, or a batch of them
// in one), transactions on one connection, and the decoding of the
// column types the stores read (values.go). It replaces pgx's pool and
// type system, whose codecs for every PostgreSQL type nb never reads
// were a tenth of nb's binary.
//
// A connection whose statement failed for any reason but an error of
// the server (a lost connection, a cancelled context), or with an error
// that ends the session, or that is left inside a transaction, is closed
// instead of going back to the pool; one idle for over a second is
// checked with a round trip before it is used again.
package pgpool

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Config is a pool's connection settings and limits.
type Config struct {
	// Conn is every connection's configuration (host, TLS, user,
	// runtime parameters such as application_name).
	Conn *pgconn.Config
	// MaxConns is how many connections may be open at once; those who
	// ask for one more wait (default: the number of CPUs, at least 4).
	MaxConns int
	// MaxConnLifetime closes a connection that has been open longer,
	// when it is released or found idle (default one hour).
	MaxConnLifetime time.Duration
	// MaxConnIdleTime closes a connection unused for longer (default 30
	// minutes).
	MaxConnIdleTime time.Duration
	// HealthCheckPeriod is how often idle connections are looked at
	// (default one minute).
	HealthCheckPeriod time.Duration
}

// The pool parameters a URL may carry (pgx's names, which nb's
// documentation has always pointed to); they are taken out of the
// parameters sent to the server.
const (
	paramMaxConns          = "pool_max_conns"
	paramMaxConnLifetime   = "pool_max_conn_lifetime"
	paramMaxConnIdleTime   = "pool_max_conn_idle_time"
	paramHealthCheckPeriod = "pool_health_check_period"
)

// unsupported are pgx's pool and statement parameters this pool does not
// have: a URL that sets one is refused, rather than the server being
// sent a parameter it does not know.
var unsupported = map[string]string{
	"pool_min_conns":                "connections are opened as they are needed",
	"pool_min_idle_conns":           "connections are opened as they are needed",
	"pool_max_conn_lifetime_jitter": "connections are closed after pool_max_conn_lifetime exactly",
	"pool_ping_timeout":             "the statement's own context bounds the check of an idle connection",
	"statement_cache_capacity":      "nb prepares each of its statements once a connection (at most 256)",
	"description_cache_capacity":    "nb prepares each of its statements once a connection (at most 256)",
	"default_query_exec_mode":       "nb prepares each statement once a connection and executes it by name",
}

// ParseConfig reads a connection string (a postgres:// URL or
// keyword=value pairs) and the PG* environment as libpq does, through
// pgconn.ParseConfig, and the pool's own parameters: pool_max_conns (a
// positive integer), pool_max_conn_lifetime, pool_max_conn_idle_time and
// pool_health_check_period (Go durations such as 90s or 1h30m).
func ParseConfig(connString string) (*Config, error) {
	cc, err := pgconn.ParseConfig(connString)
	if err != nil {
		return nil, err
	}
	cfg := &Config{Conn: cc}
	for k, why := range unsupported {
		if _, ok := cc.RuntimeParams[k]; ok {
			return nil, fmt.Errorf("the parameter %s is not supported: %s", k, why)
		}
	}
	if s, ok := cc.RuntimeParams[paramMaxConns]; ok {
		delete(cc.RuntimeParams, paramMaxConns)
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s: %q is not a positive integer", paramMaxConns, s)
		}
		cfg.MaxConns = n
	}
	for _, d := range []struct {
		key string
		dst *time.Duration
	}{
		{paramMaxConnLifetime, &cfg.MaxConnLifetime},
		{paramMaxConnIdleTime, &cfg.MaxConnIdleTime},
		{paramHealthCheckPeriod, &cfg.HealthCheckPeriod},
	} {
		s, ok := cc.RuntimeParams[d.key]
		if !ok {
			continue
		}
		delete(cc.RuntimeParams, d.key)
		v, err := time.ParseDuration(s)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%s: %q is not a positive duration (such as 90s or 1h30m)", d.key, s)
		}
		*d.dst = v
	}
	return cfg, nil
}

func (c *Config) withDefaults() *Config {
	out := *c
	if out.MaxConns <= 0 {
		out.MaxConns = max(4, runtime.NumCPU())
	}
	if out.MaxConnLifetime <= 0 {
		out.MaxConnLifetime = time.Hour
	}
	if out.MaxConnIdleTime <= 0 {
		out.MaxConnIdleTime = 30 * time.Minute
	}
	if out.HealthCheckPeriod <= 0 {
		out.HealthCheckPeriod = time.Minute
	}
	return &out
}

// ErrClosed is what a closed pool answers.
var ErrClosed = errors.New("the connection pool is closed")

// pingAfter is how long a connection may stay idle before it is checked
// with a round trip when it is taken again: a server that restarted or
// killed it meanwhile is found then, not by the statement.
const pingAfter = time.Second

// Pool is a set of connections to one database, safe for concurrent
// use.
type Pool struct {
	cfg    *Config
	tokens chan struct{} // one for each connection handed out or being opened

	mu     sync.Mutex
	idle   []*Conn // the most recently released last
	closed bool

	stop chan struct{}
	done chan struct{}
}

// New returns a pool on cfg (a copy of it). It opens no connection: the
// first statement does.
func New(cfg *Config) *Pool {
	c := cfg.withDefaults()
	c.Conn = cfg.Conn.Copy()
	p := &Pool{cfg: c, tokens: make(chan struct{}, c.MaxConns), stop: make(chan struct{}), done: make(chan struct{})}
	go p.checkIdle()
	return p
}

// Config is the pool's configuration; its Conn is a copy to connect with
// (a listener's own connection).
func (p *Pool) Config() *Config {
	c := *p.cfg
	c.Conn = p.cfg.Conn.Copy()
	return &c
}

// Conn is a connection taken from the pool; Release gives it back.
type Conn struct {
	pool    *Pool
	pg      *pgconn.PgConn
	created time.Time
	used    time.Time // when it was last released
	broken  bool      // a statement failed in a way that may leave it unusable
	// stmts are the names of the statements prepared on the connection,
	// by statementKey; prepares counts them, for new names.
	stmts    map[string]string
	prepares int
}

// PgConn is the connection itself.
func (c *Conn) PgConn() *pgconn.PgConn { return c.pg }

// Acquire takes an idle connection, or opens one when none is idle and
// fewer than MaxConns are open, or waits for one to be released until
// ctx ends.
func (p *Pool) Acquire(ctx context.Context) (*Conn, error) {
	select {
	case p.tokens <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-p.stop:
		return nil, ErrClosed
	}
	for {
		c, err := p.takeIdle()
		if err != nil {
			<-p.tokens
			return nil, err
		}
		if c == nil {
			break
		}
		if time.Since(c.used) >= pingAfter {
			if err := c.pg.Ping(ctx); err != nil {
				c.close()
				if ctx.Err() != nil {
					<-p.tokens
					return nil, ctx.Err()
				}
				continue
			}
		}
		return c, nil
	}
	pg, err := pgconn.ConnectConfig(ctx, p.cfg.Conn)
	if err != nil {
		<-p.tokens
		return nil, err
	}
	now := time.Now()
	return &Conn{pool: p, pg: pg, created: now, used: now}, nil
}

// takeIdle pops the most recently used idle connection that is still
// young enough (nil when there is none), closing those that are not.
func (p *Pool) takeIdle() (*Conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	for len(p.idle) > 0 {
		c := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if p.expired(c, time.Now()) {
			go c.close()
			continue
		}
		return c, nil
	}
	return nil, nil
}

func (p *Pool) expired(c *Conn, now time.Time) bool {
	return now.Sub(c.created) >= p.cfg.MaxConnLifetime || now.Sub(c.used) >= p.cfg.MaxConnIdleTime
}

// Release gives the connection back to the pool, or closes it when it
// is broken, inside a transaction, too old, or the pool is closed.
func (c *Conn) Release() {
	p := c.pool
	now := time.Now()
	c.used = now
	keep := !c.broken && !c.pg.IsClosed() && !c.pg.IsBusy() && c.pg.TxStatus() == 'I' && now.Sub(c.created) < p.cfg.MaxConnLifetime
	if keep {
		p.mu.Lock()
		if keep = !p.closed; keep {
			p.idle = append(p.idle, c)
		}
		p.mu.Unlock()
	}
	if !keep {
		c.close()
	}
	<-p.tokens
}

// fail marks the connection broken when err is not an error the server
// answered with (after which the connection is still in step), or is one
// that ends the session (FATAL, PANIC: the server closes it).
func (c *Conn) fail(err error) {
	if err == nil {
		return
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Severity == "FATAL" || pgErr.Severity == "PANIC" {
		c.broken = true
	}
}

func (c *Conn) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c.pg.Close(ctx) //nolint:errcheck // dropping it
}

// checkIdle closes, every HealthCheckPeriod, the idle connections past
// their lifetime or idle time, until the pool is closed.
func (p *Pool) checkIdle() {
	defer close(p.done)
	t := time.NewTicker(p.cfg.HealthCheckPeriod)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		var old []*Conn
		p.mu.Lock()
		now := time.Now()
		kept := p.idle[:0]
		for _, c := range p.idle {
			if p.expired(c, now) {
				old = append(old, c)
			} else {
				kept = append(kept, c)
			}
		}
		clear(p.idle[len(kept):])
		p.idle = kept
		p.mu.Unlock()
		for _, c := range old {
			c.close()
		}
	}
}

// Close closes the idle connections and refuses new statements; the
// connections in use are closed when they are released.
func (p *Pool) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	close(p.stop)
	<-p.done
	for _, c := range idle {
		c.close()
	}
}

// Ping checks that the database answers, with a round trip on a
// connection of the pool.
func (p *Pool) Ping(ctx context.Context) error {
	c, err := p.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	err = c.pg.Ping(ctx)
	c.fail(err)
	return err
}
