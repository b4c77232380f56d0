// Package pgruns keeps pipeline runs in PostgreSQL (a runstore.Store),
// for the replicas of nb serve: a run's row holds its description, its
// last checkpoint and its lease (holder, expiry), renewed by the holder
// every third of the lease's TTL; its events are rows beside it. Every
// write is one statement that checks the lease on the database's clock,
// so a replica that lost its lease (paused, cut off, taken for dead)
// writes nothing more; when a replica dies its lease expires and another
// replica takes the run over (runstore.Adopt) and resumes it from the
// last checkpoint. Followers anywhere are woken by LISTEN/NOTIFY, and
// poll once a second when a notification is missed. So is the holder of
// a run when another replica leaves it an answer (Run.Answered); it also
// looks every Options.AnswerPoll, for an answer whose notification it
// missed (its listening connection was down, or the replica that
// answered predates the notification).
package pgruns

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nbots/nb/internal/pglisten"
	"github.com/nbots/nb/internal/pgpool"
	"github.com/nbots/nb/internal/pgurl"
	"github.com/nbots/nb/internal/wakeup"
	"github.com/nbots/nb/pipeline/runstore"
)

// DefaultLeaseTTL is how long a run's lease lasts without a renewal: a
// dead replica's runs are taken over after it.
const DefaultLeaseTTL = 15 * time.Second

// Options shape a Store.
type Options struct {
	// LeaseTTL is how long a lease lasts without a renewal (default
	// DefaultLeaseTTL); a run renews it every third of it.
	LeaseTTL time.Duration
	// Holder names this process in the leases (default: host, pid and a
	// random part).
	Holder string
	// AnswerPoll is how often the runs this process holds look for
	// answers anyway, in case a notification was missed (default
	// DefaultAnswerPoll).
	AnswerPoll time.Duration
}

// DefaultAnswerPoll is how often a held run looks for answers whose
// notification it may have missed.
const DefaultAnswerPoll = 5 * time.Second

// Store is the pipeline runs of a PostgreSQL database.
type Store struct {
	pool   *pgpool.Pool
	url    string // with its credentials: only to scrub messages
	place  string
	ttl    time.Duration
	holder string
	takes  atomic.Int64
	own    bool // Close closes the pool

	waiters wakeup.Set // the Waits, by run
	answers wakeup.Set // the held runs' Answered, by run
	poll    time.Duration
	ctx     context.Context
	stop    context.CancelFunc
	done    sync.WaitGroup
}

var _ runstore.Store = (*Store)(nil)

// Open opens the runs of the database at url (postgres://…), creating
// the tables when missing. It returns once the store listens for the
// notifications of other replicas (or failed to connect for it, or ctx
// ended: it then listens as soon as it can). Errors never carry the
// URL's credentials.
func Open(ctx context.Context, url string, o Options) (*Store, error) {
	pool, err := pgurl.Open(ctx, url, "nb pipelines")
	if err != nil {
		return nil, err
	}
	s, err := start(ctx, pool, o, url, pgurl.Place(url), true)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// New returns the runs of pool's database, as Open does; Close leaves
// pool open.
func New(ctx context.Context, pool *pgpool.Pool, o Options) (*Store, error) {
	cc := pool.Config().Conn
	return start(ctx, pool, o, "", fmt.Sprintf("postgres://%s:%d/%s", cc.Host, cc.Port, cc.Database), false)
}

func start(ctx context.Context, pool *pgpool.Pool, o Options, url, place string, own bool) (*Store, error) {
	s := &Store{pool: pool, url: url, place: place, ttl: o.LeaseTTL, holder: o.Holder, own: own, poll: o.AnswerPoll}
	if s.ttl <= 0 {
		s.ttl = DefaultLeaseTTL
	}
	if s.poll <= 0 {
		s.poll = DefaultAnswerPoll
	}
	if s.holder == "" {
		host, _ := os.Hostname()
		s.holder = fmt.Sprintf("%s:%d:%s", host, os.Getpid(), randomHex(4))
	}
	if err := s.migrate(ctx); err != nil {
		return nil, err
	}
	s.ctx, s.stop = context.WithCancel(context.Background())
	s.done.Add(2)
	ready := make(chan struct{})
	go s.listen(ready)
	go s.pollAnswers()
	select { // notifications are not missed from here on, unless the database is out of reach
	case <-ready:
	case <-ctx.Done():
	}
	return s, nil
}

// Close stops the store's background work (and closes the pool Open
// made). Runs still held lose their leases when these expire.
func (s *Store) Close() {
	s.stop()
	s.done.Wait()
	if s.own {
		s.pool.Close()
	}
}

// Holder is the name of this process in the leases.
func (s *Store) Holder() string { return s.holder }

// newHolder names one taking of a lease: the process's name and a
// counter, so that a run this process lost and took again is not written
// by the object that lost it.
func (s *Store) newHolder() string { return fmt.Sprintf("%s#%d", s.holder, s.takes.Add(1)) }

// fail wraps a database error with what failed and where.
func (s *Store) fail(what string, err error) error {
	if s.url != "" {
		err = pgurl.Scrub(err, s.url)
	}
	return fmt.Errorf("PostgreSQL %s: %s: %w", s.place, what, err)
}

const schema = `
CREATE TABLE IF NOT EXISTS nb_pipeline_runs (
	id         text PRIMARY KEY,
	info       bytea NOT NULL,
	created    timestamptz NOT NULL,
	holder     text NOT NULL DEFAULT '',
	expires_at timestamptz NOT NULL,
	node       text NOT NULL DEFAULT '',
	done       boolean NOT NULL DEFAULT false,
	status     text NOT NULL DEFAULT '',
	checkpoint bytea,
	events     bigint NOT NULL DEFAULT 0,
	updated_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS nb_pipeline_runs_open ON nb_pipeline_runs (expires_at) WHERE NOT done;
CREATE TABLE IF NOT EXISTS nb_pipeline_events (
	run  text NOT NULL REFERENCES nb_pipeline_runs ON DELETE CASCADE,
	seq  bigint NOT NULL,
	data bytea NOT NULL,
	PRIMARY KEY (run, seq)
);
ALTER TABLE nb_pipeline_runs ADD COLUMN IF NOT EXISTS questions bytea;
CREATE TABLE IF NOT EXISTS nb_pipeline_answers (
	run  text NOT NULL REFERENCES nb_pipeline_runs ON DELETE CASCADE,
	seq  bigserial,
	data bytea NOT NULL,
	PRIMARY KEY (run, seq)
);
`

// schemaLock serialises the creation of the tables by replicas that
// start together.
const schemaLock = 0x6e625f7069706531 // "nb_pipe1"

func (s *Store) migrate(ctx context.Context) error {
	err := s.pool.BeginFunc(ctx, func(tx *pgpool.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(schemaLock)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, schema)
		return err
	})
	if err != nil {
		return s.fail("create the pipeline tables", err)
	}
	return nil
}

// channel is where new events are announced (payload: the run's id),
// and new answers (payload: answerPrefix and the run's id; a run's id
// has no ':').
const (
	channel      = "nb_pipeline_events"
	answerPrefix = "answer:"
)

const (
	createSQL = `INSERT INTO nb_pipeline_runs (id, info, created, holder, expires_at, updated_at)
		VALUES ($1, $2, $3, $4, clock_timestamp() + make_interval(secs => $5), clock_timestamp())
		ON CONFLICT (id) DO NOTHING RETURNING 1`
	// takeSQL takes the lease of a run not ended when nobody holds it or
	// its holder's expired.
	takeSQL = `UPDATE nb_pipeline_runs SET holder = $2, expires_at = clock_timestamp() + make_interval(secs => $3)
		WHERE id = $1 AND NOT done AND (holder = '' OR expires_at < clock_timestamp())
		RETURNING info, created, checkpoint, node, events`
	getSQL = `SELECT info, created, node, done, status,
			CASE WHEN holder <> '' AND expires_at >= clock_timestamp() THEN holder ELSE '' END, expires_at, events
		FROM nb_pipeline_runs WHERE id = $1`
	renewSQL = `UPDATE nb_pipeline_runs SET expires_at = clock_timestamp() + make_interval(secs => $3)
		WHERE id = $1 AND holder = $2 AND expires_at > clock_timestamp()`
	releaseSQL = `UPDATE nb_pipeline_runs SET holder = '', expires_at = clock_timestamp() WHERE id = $1 AND holder = $2`
	orphansSQL = `SELECT id FROM nb_pipeline_runs WHERE NOT done AND (holder = '' OR expires_at < clock_timestamp()) ORDER BY created, id`
	eventsSQL  = `SELECT seq, data FROM nb_pipeline_events WHERE run = $1 AND seq > $2 ORDER BY seq LIMIT $3`
	countSQL   = `SELECT events FROM nb_pipeline_runs WHERE id = $1`
	// writeSQL adds $3 events ($4) and, when $5 is set, replaces the
	// checkpoint, in one statement that writes nothing unless $2 holds
	// the unexpired lease; it returns how many runs it updated (0 or 1)
	// and wakes the followers.
	writeSQL = `WITH r AS (UPDATE nb_pipeline_runs SET events = events + $3, updated_at = clock_timestamp(),
				checkpoint = CASE WHEN $5 THEN $6 ELSE checkpoint END,
				node = CASE WHEN $5 THEN $7 ELSE node END,
				done = CASE WHEN $5 THEN $8 ELSE done END,
				status = CASE WHEN $5 THEN $9 ELSE status END
			WHERE id = $1 AND holder = $2 AND expires_at > clock_timestamp() RETURNING events),
		e AS (INSERT INTO nb_pipeline_events (run, seq, data)
			SELECT $1, r.events - $3 + u.ord, u.d FROM r, unnest($4::bytea[]) WITH ORDINALITY AS u(d, ord))
		SELECT (SELECT count(*) FROM r), (SELECT count(*) FROM (SELECT pg_notify('` + channel + `', $1) FROM r WHERE $3 > 0) n)`
	// asyncSQL lets the rest of a batch commit without waiting for the
	// disk: events and leases; a checkpoint is written durably.
	asyncSQL = "SELECT set_config('synchronous_commit', 'off', true)"
)

// Create implements runstore.Store.
func (s *Store) Create(ctx context.Context, info runstore.Info) (runstore.Run, error) {
	if err := runstore.ValidID(info.ID); err != nil {
		return nil, err
	}
	info.Created = time.Now().UTC()
	data, err := json.Marshal(info)
	if err != nil {
		return nil, err
	}
	holder := s.newHolder()
	var one int
	err = s.pool.QueryRow(ctx, createSQL, info.ID, data, info.Created, holder, s.ttl.Seconds()).Scan(&one)
	if errors.Is(err, pgpool.ErrNoRows) {
		return nil, fmt.Errorf("run %s: %w", info.ID, runstore.ErrExists)
	}
	if err != nil {
		return nil, s.fail("create run "+info.ID, err)
	}
	info.Holder = holder
	return s.held(info, holder, nil, time.Now()), nil
}

// Take implements runstore.Store.
func (s *Store) Take(ctx context.Context, id string) (runstore.Run, error) {
	if err := runstore.ValidID(id); err != nil {
		return nil, err
	}
	sent := time.Now()
	holder := s.newHolder()
	var (
		data    []byte
		info    runstore.Info
		created time.Time
		cp      []byte
		node    string
		events  int64
	)
	err := s.pool.QueryRow(ctx, takeSQL, id, holder, s.ttl.Seconds()).Scan(&data, &created, &cp, &node, &events)
	if errors.Is(err, pgpool.ErrNoRows) {
		got, gerr := s.Get(ctx, id)
		switch {
		case gerr != nil:
			return nil, gerr
		case got.Done:
			return nil, fmt.Errorf("run %s: %w", id, runstore.ErrDone)
		default:
			return nil, fmt.Errorf("run %s (held by %s): %w", id, got.Holder, runstore.ErrBusy)
		}
	}
	if err != nil {
		return nil, s.fail("take run "+id, err)
	}
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("run %s: its description does not parse: %w", id, err)
	}
	info.Created, info.Node, info.Holder, info.Events = created, node, holder, events
	return s.held(info, holder, cp, sent), nil
}

// Get implements runstore.Store.
func (s *Store) Get(ctx context.Context, id string) (runstore.Info, error) {
	var (
		info    runstore.Info
		data    []byte
		created time.Time
	)
	if err := runstore.ValidID(id); err != nil {
		return info, err
	}
	var node, status, holder string
	var done bool
	var expires time.Time
	var events int64
	err := s.pool.QueryRow(ctx, getSQL, id).Scan(&data, &created, &node, &done, &status, &holder, &expires, &events)
	if errors.Is(err, pgpool.ErrNoRows) {
		return info, fmt.Errorf("run %s: %w", id, runstore.ErrUnknown)
	}
	if err != nil {
		return info, s.fail("read run "+id, err)
	}
	if err := json.Unmarshal(data, &info); err != nil {
		return info, fmt.Errorf("run %s: its description does not parse: %w", id, err)
	}
	info.Created, info.Node, info.Done, info.Status, info.Holder, info.Events = created, node, done, status, holder, events
	if holder != "" {
		info.Expires = expires
	}
	return info, nil
}

// Checkpoint implements runstore.Store.
func (s *Store) Checkpoint(ctx context.Context, id string) ([]byte, error) {
	var cp []byte
	err := s.pool.QueryRow(ctx, `SELECT checkpoint FROM nb_pipeline_runs WHERE id = $1`, id).Scan(&cp)
	if errors.Is(err, pgpool.ErrNoRows) {
		return nil, fmt.Errorf("run %s: %w", id, runstore.ErrUnknown)
	}
	if err != nil {
		return nil, s.fail("read the checkpoint of run "+id, err)
	}
	return cp, nil
}

// Events implements runstore.Store.
func (s *Store) Events(ctx context.Context, id string, after int64, limit int) ([]runstore.Record, error) {
	lim := any(nil) // LIMIT NULL: all
	if limit > 0 {
		lim = limit
	}
	rows, err := s.pool.Query(ctx, eventsSQL, id, after, lim)
	if err != nil {
		return nil, s.fail("read the events of run "+id, err)
	}
	recs := make([]runstore.Record, 0, rows.Len())
	for rows.Next() {
		var r runstore.Record
		if err = rows.Scan(&r.Seq, &r.Data); err != nil {
			break
		}
		recs = append(recs, r)
	}
	if err != nil {
		return nil, s.fail("read the events of run "+id, err)
	}
	if len(recs) == 0 {
		if _, err := s.Get(ctx, id); err != nil {
			return nil, err
		}
	}
	return recs, nil
}

// Wait implements runstore.Store: a notification of new events, or a
// second.
func (s *Store) Wait(ctx context.Context, id string, after int64) error {
	ch, unregister := s.waiters.Register(id)
	defer unregister()
	var n int64
	if err := s.pool.QueryRow(ctx, countSQL, id).Scan(&n); err != nil {
		if errors.Is(err, pgpool.ErrNoRows) {
			return fmt.Errorf("run %s: %w", id, runstore.ErrUnknown)
		}
		return s.fail("read run "+id, err)
	}
	if n > after {
		return nil
	}
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-ch:
	case <-t.C:
	}
	return nil
}

// Orphans implements runstore.Store.
func (s *Store) Orphans(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, orphansSQL)
	if err != nil {
		return nil, s.fail("list the runs to take over", err)
	}
	ids, err := pgpool.Column[string](rows, nil)
	if err != nil {
		return nil, s.fail("list the runs to take over", err)
	}
	return ids, nil
}

// listen keeps a connection listening for new events and answers until
// Close; ready is closed when it first listens, or first fails to. Each
// time it listens (again), every waiter is woken: what was notified while
// it was connecting was missed.
func (s *Store) listen(ready chan struct{}) {
	defer s.done.Done()
	var once sync.Once
	pglisten.Watch(s.ctx, s.pool.Config().Conn, channel, time.Second, pglisten.Callbacks{
		Listening: func() {
			s.answers.WakeAll()
			s.waiters.WakeAll()
			once.Do(func() { close(ready) })
		},
		Notify: func(payload string) {
			if id, ok := strings.CutPrefix(payload, answerPrefix); ok {
				s.answers.Wake(id)
				return
			}
			s.waiters.Wake(payload)
		},
		Lost: func(error) { once.Do(func() { close(ready) }) },
	})
}

// pollAnswers wakes every held run's Answered every s.poll, until Close.
func (s *Store) pollAnswers() {
	defer s.done.Done()
	t := time.NewTicker(s.poll)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			s.answers.WakeAll()
		}
	}
}

// held starts the renewals of a lease taken at sent.
func (s *Store) held(info runstore.Info, holder string, cp []byte, sent time.Time) *run {
	r := &run{s: s, holder: holder, info: info, cp: cp, lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
		kick: make(chan struct{}, 1), renewed: sent}
	r.answered, r.unregister = s.answers.Register(info.ID)
	go r.loop()
	return r
}

// run is a run whose lease this process holds.
type run struct {
	s      *Store
	holder string // this taking's name in the lease
	info   runstore.Info
	cp     []byte

	mu       sync.Mutex
	pending  [][]byte // events appended, not yet written
	renewed  time.Time
	err      error
	released bool
	lost     chan struct{}

	write   sync.Mutex // one write at a time, in order
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	endOnce sync.Once

	answered   chan struct{} // registered in s.answers
	unregister func()
}

func (r *run) Info() runstore.Info   { return r.info }
func (r *run) Checkpoint() []byte    { return r.cp }
func (r *run) Lost() <-chan struct{} { return r.lost }

func (r *run) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// markLost records why the lease was lost (the first reason).
func (r *run) markLost(err error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		if err == nil {
			err = fmt.Errorf("run %s: %w", r.info.ID, runstore.ErrLost)
		} else if !errors.Is(err, runstore.ErrLost) {
			err = fmt.Errorf("run %s: %w: %w", r.info.ID, runstore.ErrLost, err)
		}
		r.err = err
		close(r.lost)
	}
	return r.err
}

// check fails when the lease is lost or may have expired by this
// process's clock (the database checks it again on its own).
func (r *run) check() error {
	r.mu.Lock()
	err, renewed, released := r.err, r.renewed, r.released
	r.mu.Unlock()
	switch {
	case err != nil:
		return err
	case released:
		return fmt.Errorf("run %s was released: %w", r.info.ID, runstore.ErrLost)
	case time.Since(renewed) >= r.s.ttl:
		return r.markLost(nil)
	}
	return nil
}

// Append implements runstore.Run: the events are written in the
// background, at most one write in flight, all that came meanwhile in
// the next.
func (r *run) Append(events ...[]byte) error {
	if err := r.check(); err != nil {
		return err
	}
	r.mu.Lock()
	r.pending = append(r.pending, events...)
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
	return nil
}

// Save implements runstore.Run.
func (r *run) Save(cp runstore.Checkpoint) error {
	if err := r.check(); err != nil {
		return err
	}
	return r.flush(&cp)
}

// flush writes the pending events, and cp when not nil, in one
// statement.
func (r *run) flush(cp *runstore.Checkpoint) error {
	r.write.Lock()
	defer r.write.Unlock()
	r.mu.Lock()
	events := r.pending
	r.pending = nil
	r.mu.Unlock()
	if len(events) == 0 && cp == nil {
		return nil
	}
	if err := r.Err(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(r.s.ttl, time.Minute))
	defer cancel()
	var b pgpool.Batch
	if cp == nil {
		b.Queue(asyncSQL)
		cp = &runstore.Checkpoint{}
		b.Queue(writeSQL, r.info.ID, r.holder, len(events), events, false, nil, "", false, "")
	} else {
		b.Queue(writeSQL, r.info.ID, r.holder, len(events), events, true, cp.Data, cp.Node, cp.Done, cp.Status)
	}
	br := r.s.pool.SendBatch(ctx, &b)
	var n, woke int64
	var err error
	for range b.Len() - 1 {
		if _, err = br.Exec(); err != nil {
			break
		}
	}
	if err == nil {
		err = br.QueryRow().Scan(&n, &woke)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// Whether it committed is unknown: the run cannot go on.
		return r.markLost(r.s.fail("write run "+r.info.ID, err))
	}
	if n == 0 {
		return r.markLost(nil)
	}
	return nil
}

// loop writes appended events and renews the lease every third of its
// TTL; when the lease is refused, or cannot be renewed for a whole TTL,
// the run is lost.
func (r *run) loop() {
	defer close(r.done)
	tick := time.NewTicker(r.s.ttl / 3)
	defer tick.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-r.kick:
			r.flush(nil) //nolint:errcheck // a failure marks the run lost
			continue
		case <-tick.C:
		}
		if r.Err() != nil {
			return
		}
		sent := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), r.s.ttl/3)
		var b pgpool.Batch
		b.Queue(asyncSQL)
		b.Queue(renewSQL, r.info.ID, r.holder, r.s.ttl.Seconds())
		br := r.s.pool.SendBatch(ctx, &b)
		_, err := br.Exec()
		var affected int64
		if err == nil {
			tag, e := br.Exec()
			err, affected = e, tag.RowsAffected()
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		cancel()
		r.mu.Lock()
		renewed := r.renewed
		r.mu.Unlock()
		switch {
		case err == nil && affected == 1:
			r.mu.Lock()
			r.renewed = sent
			r.mu.Unlock()
		case err == nil:
			r.markLost(nil)
			return
		case time.Since(renewed) >= r.s.ttl:
			r.markLost(r.s.fail("renew the lease of run "+r.info.ID, err))
			return
		}
	}
}

// Release implements runstore.Run.
func (r *run) Release() error {
	var err error
	r.endOnce.Do(func() {
		r.unregister()
		close(r.stop)
		<-r.done
		if r.Err() == nil {
			err = r.flush(nil)
		}
		r.mu.Lock()
		r.released = true
		r.mu.Unlock()
		if r.Err() == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, e := r.s.pool.Exec(ctx, releaseSQL, r.info.ID, r.holder); e != nil && err == nil {
				err = r.s.fail("release run "+r.info.ID, e)
			}
		}
	})
	return err
}

// stopRenewing stops the background work without releasing the lease,
// as a process that dies does.
func (r *run) stopRenewing() {
	r.endOnce.Do(func() {
		r.unregister()
		close(r.stop)
		<-r.done
	})
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "0"
	}
	return hex.EncodeToString(b)
}

// Questions implements runstore.Store.
func (s *Store) Questions(ctx context.Context, id string) ([]byte, error) {
	var q []byte
	err := s.pool.QueryRow(ctx, `SELECT questions FROM nb_pipeline_runs WHERE id = $1`, id).Scan(&q)
	if errors.Is(err, pgpool.ErrNoRows) {
		return nil, fmt.Errorf("run %s: %w", id, runstore.ErrUnknown)
	}
	if err != nil {
		return nil, s.fail("read the questions of run "+id, err)
	}
	return q, nil
}

// answerSQL leaves an answer for a run not ended and notifies its
// holder, in one statement; it returns how many it left (0 or 1).
const answerSQL = `WITH a AS (INSERT INTO nb_pipeline_answers (run, data)
		SELECT id, $2 FROM nb_pipeline_runs WHERE id = $1 AND NOT done RETURNING run)
	SELECT count(*) FROM (SELECT pg_notify('` + channel + `', '` + answerPrefix + `' || run) FROM a) n`

// Answer implements runstore.Store: a row of nb_pipeline_answers, and a
// notification that wakes the holder's Answered on whichever replica it
// is.
func (s *Store) Answer(ctx context.Context, id string, data []byte) error {
	var n int64
	err := s.pool.QueryRow(ctx, answerSQL, id, data).Scan(&n)
	if err == nil && n == 0 {
		err = pgpool.ErrNoRows
	}
	if errors.Is(err, pgpool.ErrNoRows) {
		if _, gerr := s.Get(ctx, id); gerr != nil {
			return gerr
		}
		return fmt.Errorf("run %s: %w", id, runstore.ErrDone)
	}
	if err != nil {
		return s.fail("answer run "+id, err)
	}
	return nil
}

// SetQuestions implements runstore.Run, checked against the lease.
func (r *run) SetQuestions(data []byte) error {
	if err := r.check(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.s.ttl)
	defer cancel()
	tag, err := r.s.pool.Exec(ctx, `UPDATE nb_pipeline_runs SET questions = $3
		WHERE id = $1 AND holder = $2 AND expires_at > clock_timestamp()`, r.info.ID, r.holder, data)
	if err != nil {
		return r.s.fail("publish the questions of run "+r.info.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return r.markLost(nil)
	}
	return nil
}

// Answers implements runstore.Run.
func (r *run) Answers(ctx context.Context) ([][]byte, error) {
	rows, err := r.s.pool.Query(ctx, `WITH taken AS (DELETE FROM nb_pipeline_answers WHERE run = $1 RETURNING seq, data)
		SELECT data FROM taken ORDER BY seq`, r.info.ID)
	if err != nil {
		return nil, r.s.fail("read the answers of run "+r.info.ID, err)
	}
	out, err := pgpool.Column[[]byte](rows, nil)
	if err != nil {
		return nil, r.s.fail("read the answers of run "+r.info.ID, err)
	}
	return out, nil
}

// Answered implements runstore.Run: woken by the notification of an
// answer left through any replica's Store, and every Options.AnswerPoll.
func (r *run) Answered() <-chan struct{} { return r.answered }
