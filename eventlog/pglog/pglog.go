// Package pglog keeps what nb serve's front-ends keep beyond a request in
// PostgreSQL, for every replica of the server: the output of the
// exchanges clients poll (eventlog logs, published as they grow and
// followed from any replica), values such as stored responses and run
// records, and which replicas are alive. It implements eventlog.Shared.
package pglog

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nbots/nb/eventlog"
	"github.com/nbots/nb/internal/pgpool"
	"github.com/nbots/nb/internal/pgurl"
	"github.com/nbots/nb/internal/wakeup"
)

// Options configure a Store. Zero values take the defaults.
type Options struct {
	// Replica names this process among the replicas (default: the host
	// name and a random suffix).
	Replica string
	// Log receives what goes wrong in the background; nil discards it.
	Log *slog.Logger
	// Heartbeat is how often the replica tells the store it is alive,
	// and checks that it reaches it (default 1 s).
	Heartbeat time.Duration
	// DeadAfter is how long a replica may go unheard before the others
	// take it for gone and fail the logs it was writing (default 10 s).
	DeadAfter time.Duration
	// Batch, when positive, is how long a published log gathers output
	// before it is written. By default there is no wait: the output that
	// comes while one write is in flight goes in the next, so a stream is
	// written at most once per round trip to the database, whatever the
	// model's pace.
	Batch time.Duration
	// Poll is how often a copy looks for news when no notification came
	// (default 1 s): notifications wake it sooner.
	Poll time.Duration
	// Janitor is how often expired entries are deleted (default 5 s).
	Janitor time.Duration
}

func (o Options) withDefaults() Options {
	if o.Replica == "" {
		host, _ := os.Hostname()
		if host == "" {
			host = "nb"
		}
		o.Replica = host + "-" + randomHex(4)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = time.Second
	}
	if o.DeadAfter <= 0 {
		o.DeadAfter = 10 * time.Second
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Janitor <= 0 {
		o.Janitor = 5 * time.Second
	}
	return o
}

// Store is the shared state of nb serve's replicas in one PostgreSQL
// database. It is safe for concurrent use.
type Store struct {
	pool      *pgpool.Pool
	opts      Options
	name      string // the database, without credentials, for messages
	closePool bool

	health atomic.Pointer[error] // nil: reachable

	waiters wakeup.Set // the followers, by log id

	mu     sync.Mutex
	limits map[string]eventlog.Limits // by kind of value, and logKind

	stop     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
}

// logKind keys the logs' limits in Store.limits.
const logKind = "\x00log"

// notifyChannel is the channel of LISTEN/NOTIFY: its payload is the id
// of a log that changed.
const notifyChannel = "nb_serve_logs"

// Open connects to the PostgreSQL database at rawURL (postgres://…,
// through package pgurl: its errors never carry the credentials),
// creates the tables it needs if they are missing, and returns the store
// of this replica. The pool's connections are named "nb serve REPLICA"
// (application_name) unless the URL names them.
func Open(ctx context.Context, rawURL string, o Options) (*Store, error) {
	o = o.withDefaults()
	pool, err := pgurl.Open(ctx, rawURL, "nb serve "+o.Replica)
	if err != nil {
		return nil, fmt.Errorf("nb serve's shared state: %w", err)
	}
	name := pgurl.Place(rawURL)
	s, err := start(ctx, pool, o, name, true)
	if err != nil {
		pool.Close()
		return nil, pgurl.Scrub(err, rawURL)
	}
	return s, nil
}

// New returns the store of this replica on pool, creating the tables it
// needs if they are missing. Close does not close pool.
func New(ctx context.Context, pool *pgpool.Pool, o Options) (*Store, error) {
	cc := pool.Config().Conn
	return start(ctx, pool, o, fmt.Sprintf("postgres://%s:%d/%s", cc.Host, cc.Port, cc.Database), false)
}

// start returns the store on pool, named name in messages; closePool:
// Close closes pool.
func start(ctx context.Context, pool *pgpool.Pool, o Options, name string, closePool bool) (*Store, error) {
	o = o.withDefaults()
	s := &Store{pool: pool, opts: o, name: name, closePool: closePool,
		limits: map[string]eventlog.Limits{}, stop: make(chan struct{})}
	if err := s.migrate(ctx); err != nil {
		return nil, err
	}
	if err := s.beat(ctx); err != nil {
		return nil, err
	}
	s.wg.Add(2)
	go s.listen()
	go s.every(o.Janitor, s.janitor)
	return s, nil
}

// Close stops the store's background work (and closes the pool Open
// made). Logs still being published stop being published.
func (s *Store) Close() {
	s.stopOnce.Do(func() {
		close(s.stop)
		s.wg.Wait()
		if s.closePool {
			s.pool.Close()
		}
	})
}

// Replica implements eventlog.Shared.
func (s *Store) Replica() string { return s.opts.Replica }

// Name is the database, without credentials.
func (s *Store) Name() string { return s.name }

// Err implements eventlog.Shared: why the replica does not reach the
// database, as the last heartbeat or query found it.
func (s *Store) Err() error {
	if p := s.health.Load(); p != nil {
		return *p
	}
	return nil
}

// UnreachableError says the replica cannot reach the shared store.
type UnreachableError struct {
	Store string // the database, without credentials
	Err   error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("the shared store %s is unreachable: %v", e.Store, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// failed records err when it says the database is out of reach, and
// returns it wrapped so that it says which store.
func (s *Store) failed(err error) error {
	if err == nil || errors.Is(err, context.Canceled) {
		return err
	}
	var ue *UnreachableError
	if errors.As(err, &ue) {
		return err
	}
	if unreachable(err) {
		e := error(&UnreachableError{Store: s.name, Err: err})
		if s.health.Swap(&e) == nil {
			s.opts.Log.Warn("shared store unreachable: taking no work until it answers", "store", s.name, "error", err.Error())
		}
		return e
	}
	return fmt.Errorf("the shared store %s: %w", s.name, err)
}

// unreachable tells a failure to reach the database from a failure of
// a query.
func unreachable(err error) bool {
	var pgErr interface{ SQLState() string }
	if errors.As(err, &pgErr) {
		switch c := pgErr.SQLState(); {
		case len(c) >= 2 && (c[:2] == "08" || c[:2] == "57"): // connection exception, operator intervention
			return true
		}
		return false
	}
	return true // no answer of the server: the connection
}

// Run is the replica's heartbeat: every Heartbeat until ctx ends or the
// store is closed, it tells the other replicas that this one is alive
// and finds out whether it reaches the database (Err: the replica takes
// no work while the store is out of reach, and takes work again when it
// answers, so an outage is not a failure of Run). It returns nil once
// ctx ended. Without Run the others take this replica for gone after
// DeadAfter: run it in the program's run group (nb serve's), so that it
// stops with the program and the program waits for it.
func (s *Store) Run(ctx context.Context) error {
	t := time.NewTicker(s.opts.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.stop:
			return nil
		case <-t.C:
			s.heartbeat(ctx)
		}
	}
}

// heartbeat tells the others this replica is alive, and finds out
// whether it reaches the database.
func (s *Store) heartbeat(parent context.Context) {
	ctx, cancel := context.WithTimeout(parent, max(2*s.opts.Heartbeat, 2*time.Second))
	defer cancel()
	if s.beat(ctx) != nil || parent.Err() != nil {
		return
	}
	if s.health.Swap(nil) != nil {
		s.opts.Log.Info("shared store reachable again: taking work", "store", s.name)
	}
}

// every calls f every d until the store closes.
func (s *Store) every(d time.Duration, f func()) {
	defer s.wg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			f()
		}
	}
}

func (s *Store) beat(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO nb_serve_replicas (id, seen) VALUES ($1, now())
		ON CONFLICT (id) DO UPDATE SET seen = now()`, s.opts.Replica)
	if err != nil {
		if !unreachable(err) {
			// Any failure of the heartbeat means the replica cannot say it is alive.
			err = &UnreachableError{Store: s.name, Err: err}
		}
		return s.failed(err)
	}
	return nil
}

// Alive implements eventlog.Shared.
func (s *Store) Alive(ctx context.Context, replica string) (bool, error) {
	if replica == s.opts.Replica {
		return s.Err() == nil, nil
	}
	var alive bool
	err := s.pool.QueryRow(ctx, `SELECT seen > now() - $2::interval FROM nb_serve_replicas WHERE id = $1`, replica, s.opts.DeadAfter).Scan(&alive)
	if errors.Is(err, pgpool.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, s.failed(err)
	}
	return alive, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) //nolint:errcheck // never fails
	return hex.EncodeToString(b)
}
