// Package pgstore is a state.Store on PostgreSQL, for replicas of nb
// that share conversations: one exchange per conversation at a time
// across machines through a lease that expires when its holder dies (and
// is then taken over), each append one transaction that checks the lease,
// large tool outputs beside the history, and the reference's encryption
// when a password is set. The schema is created and migrated on Open.
package pgstore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/nbots/nb/internal/pglisten"
	"github.com/nbots/nb/internal/pgpool"
	"github.com/nbots/nb/internal/pgurl"
	"github.com/nbots/nb/internal/wakeup"
	"github.com/nbots/nb/state"
)

// DefaultLeaseTTL is how long a turn's lease lasts without a renewal: a
// dead replica's conversations are taken over after it.
const DefaultLeaseTTL = 15 * time.Second

// Options shape a Store.
type Options struct {
	// Cipher encrypts histories, kept outputs and names; nil stores them
	// plain.
	Cipher *state.Cipher
	// LeaseTTL is how long a lease lasts without a renewal (default
	// DefaultLeaseTTL); a turn renews its lease every third of it.
	LeaseTTL time.Duration
}

// Store is the conversations of a PostgreSQL database.
type Store struct {
	pool   *pgpool.Pool
	url    string // with its credentials: only to scrub messages
	place  string // without them
	cipher *state.Cipher
	ttl    time.Duration
	// holder prefixes the holder ids of this store's leases (host, pid
	// and a random part, for people looking at the table).
	holder string
	turns  atomic.Int64

	wake      wakeup.Set // the Begins waiting for a released lease, by wake id
	listening sync.Once
	stop      context.CancelFunc
	stopped   chan struct{}
	ctx       context.Context
}

var _ state.Store = (*Store)(nil)

// Open opens the store of a PostgreSQL URL (postgres://…), creating or
// migrating its tables. Its errors never carry the URL's credentials.
func Open(ctx context.Context, url string, o Options) (*Store, error) {
	pool, err := pgurl.Open(ctx, url, "nb conversations")
	if err != nil {
		return nil, err
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("PostgreSQL %s: create the conversation tables: %w", pgurl.Place(url), pgurl.Scrub(err, url))
	}
	s := &Store{pool: pool, url: url, place: pgurl.Place(url), cipher: o.Cipher, ttl: o.LeaseTTL, stopped: make(chan struct{})}
	if s.ttl <= 0 {
		s.ttl = DefaultLeaseTTL
	}
	host, _ := os.Hostname()
	s.holder = fmt.Sprintf("%s:%d:%s", host, os.Getpid(), randomHex(6))
	s.ctx, s.stop = context.WithCancel(context.Background())
	return s, nil
}

// Close stops the store's background work and closes its connections.
// Turns still open lose their leases when these expire.
func (s *Store) Close() {
	s.stop()
	s.listening.Do(func() { close(s.stopped) }) // never started
	<-s.stopped
	s.pool.Close()
}

// Place is the database, for people: postgres://host:port/database.
func (s *Store) Place() string { return s.place }

// Ping checks that the database answers (a replica's readiness).
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return s.fail("reach the database", err)
	}
	return nil
}

// fail wraps a database error with what failed and where, its message
// scrubbed of credentials.
func (s *Store) fail(what string, err error) error {
	return fmt.Errorf("PostgreSQL %s: %s: %w", s.place, what, pgurl.Scrub(err, s.url))
}

// Location says where a bot's conversations are.
func (s *Store) Location(b state.Bot) (string, error) {
	path, err := state.BotPath(b)
	if err != nil {
		return "", err
	}
	return s.place + ", conversations of " + path, nil
}

// name is a conversation's identity in the tables.
type name struct {
	bot           string
	sealed        bool
	endUser, key  []byte
	display, wake string
}

// Open returns a conversation; it reads and writes nothing.
func (s *Store) Open(b state.Bot, endUser, key string) (state.Conversation, error) {
	path, err := state.BotPath(b)
	if err != nil {
		return nil, err
	}
	n := name{bot: path, sealed: s.cipher != nil, endUser: []byte(endUser), key: []byte(key)}
	if s.cipher != nil {
		n.endUser, n.key = []byte(s.cipher.Soft(endUser)), []byte(s.cipher.Soft(key))
	}
	f := state.Files{Cipher: s.cipher} // its path components say the names the same way
	n.display = path + "/" + f.Component(endUser) + "/" + f.Component(key)
	h := sha256.New()
	for _, part := range [][]byte{[]byte(n.bot), {boolByte(n.sealed)}, n.endUser, n.key} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	n.wake = hex.EncodeToString(h.Sum(nil)[:16])
	return &conversation{s: s, n: n}, nil
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

type conversation struct {
	s *Store
	n name
}

// Location is the conversation's place in the database.
func (c *conversation) Location() string { return c.s.place + ", conversation " + c.n.display }

// HistoryLocation is where its history is.
func (c *conversation) HistoryLocation() string { return c.Location() + ", history" }

// args are the conversation's identity as the first four parameters of
// every statement.
func (c *conversation) args(more ...any) []any {
	return append([]any{c.n.bot, c.n.sealed, c.n.endUser, c.n.key}, more...)
}

const (
	// claimSQL takes the lease when it is free or expired; it returns a
	// row when it did.
	claimSQL = `INSERT INTO nb_leases AS l (bot, sealed, end_user, key, holder, expires_at)
		VALUES ($1, $2, $3, $4, $5, clock_timestamp() + make_interval(secs => $6))
		ON CONFLICT (bot, sealed, end_user, key) DO UPDATE
			SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
			WHERE l.expires_at < clock_timestamp()
		RETURNING 1`
	// historySQL reads the events in order.
	historySQL  = historyFrom + ` ORDER BY e.seq`
	historyFrom = `SELECT e.data FROM nb_events e JOIN nb_conversations c ON c.id = e.conversation
		WHERE c.bot = $1 AND c.sealed = $2 AND c.end_user = $3 AND c.key = $4`
	// heldHistorySQL reads those after the first $6 only when $5 holds
	// the lease (in the batch of claimSQL, so that a failed claim reads
	// nothing).
	heldHistorySQL = historyFrom + `
		AND EXISTS (SELECT 1 FROM nb_leases l WHERE l.bot = $1 AND l.sealed = $2 AND l.end_user = $3 AND l.key = $4 AND l.holder = $5)
		AND e.seq > $6 ORDER BY e.seq`
	// countSQL is the number of events stored.
	countSQL = `SELECT coalesce((SELECT events FROM nb_conversations WHERE bot = $1 AND sealed = $2 AND end_user = $3 AND key = $4), 0)`
	// leaseCTE locks the lease while it is $5's and unexpired: the
	// statement that uses it writes nothing otherwise, and a takeover
	// waits for it to commit.
	leaseCTE = `l AS (SELECT 1 FROM nb_leases WHERE bot = $1 AND sealed = $2 AND end_user = $3 AND key = $4
		AND holder = $5 AND expires_at > clock_timestamp() FOR UPDATE)`
	// appendSQL adds $6 events ($7) in one statement (one transaction):
	// it returns 0 when the lease is not held.
	appendSQL = `WITH ` + leaseCTE + `,
		c AS (INSERT INTO nb_conversations (bot, sealed, end_user, key, events, updated_at)
			SELECT $1, $2, $3, $4, $6, clock_timestamp() FROM l
			ON CONFLICT (bot, sealed, end_user, key) DO UPDATE
				SET events = nb_conversations.events + EXCLUDED.events, updated_at = EXCLUDED.updated_at
			RETURNING id, events),
		e AS (INSERT INTO nb_events (conversation, seq, data)
			SELECT c.id, c.events - $6 + u.ord::integer, u.d FROM c, unnest($7::text[]) WITH ORDINALITY AS u(d, ord))
		SELECT count(*) FROM c`
	// keepSQL keeps output $6 ($7) under the lease.
	keepSQL = `WITH ` + leaseCTE + `,
		c AS (INSERT INTO nb_conversations (bot, sealed, end_user, key)
			SELECT $1, $2, $3, $4 FROM l
			ON CONFLICT (bot, sealed, end_user, key) DO UPDATE SET updated_at = nb_conversations.updated_at
			RETURNING id),
		o AS (INSERT INTO nb_outputs (conversation, name, data) SELECT c.id, $6, $7 FROM c
			ON CONFLICT (conversation, name) DO UPDATE SET data = EXCLUDED.data RETURNING 1)
		SELECT count(*) FROM o`
	// deleteSQL removes the conversation under the lease; it returns
	// how many conversations it removed.
	deleteSQL = `WITH ` + leaseCTE + `,
		d AS (DELETE FROM nb_conversations WHERE bot = $1 AND sealed = $2 AND end_user = $3 AND key = $4
			AND EXISTS (SELECT 1 FROM l) RETURNING 1)
		SELECT (SELECT count(*) FROM l), (SELECT count(*) FROM d)`
	// renewSQL extends the lease while it is $5's and unexpired.
	renewSQL = `UPDATE nb_leases SET expires_at = clock_timestamp() + make_interval(secs => $6)
		WHERE bot = $1 AND sealed = $2 AND end_user = $3 AND key = $4 AND holder = $5 AND expires_at > clock_timestamp()`
	// releaseSQL frees the lease and wakes the waiters.
	releaseSQL = `WITH d AS (DELETE FROM nb_leases WHERE bot = $1 AND sealed = $2 AND end_user = $3 AND key = $4 AND holder = $5 RETURNING 1)
		SELECT pg_notify('` + channel + `', $6) FROM d`
	// channel is where released leases are announced.
	channel = "nb_state_free"
	// asyncSQL makes the rest of a batch's transaction commit without
	// waiting for the disk. Lease writes (claim, renewal, release) need
	// no durability: a claim lost in a crash of the server fails its
	// holder's next Append (which checks the lease), and the durable
	// commit of an Append flushes every claim before it; a lost release
	// or renewal only delays a takeover until the lease expires.
	asyncSQL = "SELECT set_config('synchronous_commit', 'off', true)"
)

// hold takes the conversation's lease for holder, waiting as Begin says;
// with after ≥ 0, it also reads the history's events after the first
// after in the same round trip (and, after > 0, how many are stored).
// sent is when the claim that took it was sent: the lease lasts at
// least the TTL from then.
func (c *conversation) hold(ctx context.Context, holder string, onBusy func(), after int) (rows []string, total int, sent time.Time, err error) {
	var ch chan struct{}
	// The poll finds leases that expired (their holders cannot announce
	// it) and releases whose announcement was missed.
	wait := state.BusyWait{First: 10 * time.Millisecond, Max: 250 * time.Millisecond}
	for {
		sent = time.Now()
		rows, total, ok, err := c.claim(ctx, holder, after)
		if err != nil {
			return nil, 0, sent, err
		}
		if ok {
			return rows, total, sent, nil
		}
		if onBusy == nil {
			return nil, 0, sent, state.ErrBusy
		}
		if ch == nil {
			c.s.listen()
			var unregister func()
			ch, unregister = c.s.wake.Register(c.n.wake)
			defer unregister()
		}
		if err := wait.Wait(ctx, onBusy, ch); err != nil {
			return nil, 0, sent, err
		}
	}
}

// claim tries once to take the lease, and reads the history after the
// first after events when after ≥ 0.
func (c *conversation) claim(ctx context.Context, holder string, after int) (data []string, total int, ok bool, err error) {
	var b pgpool.Batch
	b.Queue(asyncSQL)
	b.Queue(claimSQL, c.args(holder, c.s.ttl.Seconds())...)
	read := after >= 0
	if read {
		b.Queue(heldHistorySQL, c.args(holder, after)...)
		if after > 0 {
			b.Queue(countSQL, c.args()...)
		}
	}
	br := c.s.pool.SendBatch(ctx, &b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, 0, false, c.s.fail("take the conversation "+c.n.display, ctxErr(ctx, err))
	}
	var one int
	switch err := br.QueryRow().Scan(&one); {
	case errors.Is(err, pgpool.ErrNoRows):
		return nil, 0, false, nil
	case err != nil:
		return nil, 0, false, c.s.fail("take the conversation "+c.n.display, ctxErr(ctx, err))
	}
	if read {
		rows, err := br.Query()
		if err == nil {
			data, err = pgpool.Column[string](rows, nil)
		}
		if err == nil && after > 0 {
			err = br.QueryRow().Scan(&total)
		}
		if err != nil {
			c.release(holder)
			return nil, 0, false, c.s.fail("read "+c.n.display, ctxErr(ctx, err))
		}
	}
	if err := br.Close(); err != nil {
		c.release(holder)
		return nil, 0, false, c.s.fail("take the conversation "+c.n.display, ctxErr(ctx, err))
	}
	return data, total, true, nil
}

// ctxErr prefers the context's error, so a caller that gave up sees
// context.Canceled or DeadlineExceeded.
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%v)", ctx.Err(), err)
	}
	return err
}

// release frees holder's lease and tells the waiters.
func (c *conversation) release(holder string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var b pgpool.Batch
	b.Queue(asyncSQL)
	b.Queue(releaseSQL, c.args(holder, c.n.wake)...)
	c.s.pool.SendBatch(ctx, &b).Close() //nolint:errcheck // best effort: an unreleased lease expires
}

// decode reads stored events.
func (c *conversation) decode(data []string) ([]state.Event, error) { return c.decodeFrom(data, 0) }

// decodeFrom reads stored events, the first of them the history's
// event first+1.
func (c *conversation) decodeFrom(data []string, first int) ([]state.Event, error) {
	out := make([]state.Event, len(data), len(data)+16)
	for i, d := range data {
		text := []byte(d)
		if c.n.sealed {
			plain, err := c.s.cipher.Decrypt(d)
			if err != nil {
				return nil, fmt.Errorf("%s: event %d: %w", c.HistoryLocation(), first+i+1, err)
			}
			text = plain
		}
		var r state.JSONEvent
		if err := json.Unmarshal(text, &r); err != nil {
			return nil, fmt.Errorf("%s: event %d is damaged: %v", c.HistoryLocation(), first+i+1, err)
		}
		out[i] = r.Event()
	}
	return out, nil
}

// encode writes events as stored.
func (c *conversation) encode(events []state.Event) ([]string, error) {
	out := make([]string, len(events))
	for i, r := range state.JSON(events) {
		b, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("encode an event: %w", err)
		}
		out[i] = string(b)
		if c.n.sealed {
			if out[i], err = c.s.cipher.Encrypt(b); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// History reads the conversation without holding it.
func (c *conversation) History(ctx context.Context) ([]state.Event, error) {
	rows, err := c.s.pool.Query(ctx, historySQL, c.args()...)
	if err != nil {
		return nil, c.s.fail("read "+c.n.display, ctxErr(ctx, err))
	}
	data, err := pgpool.Column[string](rows, nil)
	if err != nil {
		return nil, c.s.fail("read "+c.n.display, ctxErr(ctx, err))
	}
	return c.decode(data)
}

// outputName is a kept output's name as stored.
func (c *conversation) outputName(id string) []byte {
	n := state.OutputName(id)
	if c.n.sealed {
		return []byte(c.s.cipher.Soft(n))
	}
	return []byte(n)
}

// Output reads a kept output.
func (c *conversation) Output(ctx context.Context, id string) (string, error) {
	var data []byte
	err := c.s.pool.QueryRow(ctx, `SELECT o.data FROM nb_outputs o JOIN nb_conversations c ON c.id = o.conversation
		WHERE c.bot = $1 AND c.sealed = $2 AND c.end_user = $3 AND c.key = $4 AND o.name = $5`, c.args(c.outputName(id))...).Scan(&data)
	if errors.Is(err, pgpool.ErrNoRows) {
		return "", fmt.Errorf("read kept output: no output %q in %s", state.OutputName(id), c.Location())
	}
	if err != nil {
		return "", c.s.fail("read kept output of "+c.n.display, ctxErr(ctx, err))
	}
	if c.n.sealed {
		if data, err = c.s.cipher.Decrypt(string(data)); err != nil {
			return "", fmt.Errorf("read kept output %q of %s: %w", state.OutputName(id), c.Location(), err)
		}
	}
	return string(data), nil
}

// Delete removes the conversation and its kept outputs once it holds
// its lease.
func (c *conversation) Delete(ctx context.Context) (bool, error) {
	holder := c.s.newHolder()
	if _, _, _, err := c.hold(ctx, holder, func() {}, -1); err != nil {
		return false, err
	}
	defer c.release(holder)
	var held, deleted int
	if err := c.s.pool.QueryRow(ctx, deleteSQL, c.args(holder)...).Scan(&held, &deleted); err != nil {
		return false, c.s.fail("delete "+c.n.display, ctxErr(ctx, err))
	}
	if held == 0 {
		return false, fmt.Errorf("delete %s: %w", c.Location(), state.ErrLost)
	}
	return deleted > 0, nil
}

func (s *Store) newHolder() string { return fmt.Sprintf("%s:%d", s.holder, s.turns.Add(1)) }

// Begin takes the conversation's lease (waiting as the interface says)
// and reads its history.
func (c *conversation) Begin(ctx context.Context, onBusy func()) (state.Turn, error) {
	t, _, err := c.begin(ctx, onBusy, 0)
	return t, err
}

// BeginAfter is Begin reading only the events after the first n (one
// query, in the claim's round trip): see state.TailBeginner.
func (c *conversation) BeginAfter(ctx context.Context, onBusy func(), n int) (state.Turn, int, error) {
	return c.begin(ctx, onBusy, max(n, 0))
}

func (c *conversation) begin(ctx context.Context, onBusy func(), after int) (state.Turn, int, error) {
	holder := c.s.newHolder()
	data, total, start, err := c.hold(ctx, holder, onBusy, after)
	if err != nil {
		return nil, 0, err
	}
	if after > 0 && total < after {
		// Fewer than the caller has: deleted since. The whole of it.
		after = 0
		rows, err := c.s.pool.Query(ctx, heldHistorySQL, c.args(holder, 0)...)
		if err == nil {
			data, err = pgpool.Column[string](rows, nil)
		}
		if err != nil {
			c.release(holder)
			return nil, 0, c.s.fail("read "+c.n.display, ctxErr(ctx, err))
		}
	}
	if after == 0 {
		total = len(data)
	}
	events, err := c.decodeFrom(data, after)
	if err != nil {
		c.release(holder)
		return nil, 0, err
	}
	t := &turn{c: c, holder: holder, events: events, stop: make(chan struct{}), done: make(chan struct{})}
	t.renewed.Store(start.UnixNano())
	go t.renew()
	return t, total, nil
}

// turn holds a conversation's lease and renews it in the background.
type turn struct {
	c      *conversation
	holder string
	events []state.Event
	// renewed is when the last renewal that succeeded was sent (unix
	// ns): the lease lasts at least the TTL from it.
	renewed atomic.Int64
	lost    atomic.Pointer[error]
	stop    chan struct{}
	done    chan struct{}
	endOnce sync.Once
}

func (t *turn) History() []state.Event { return t.events }

// markLost records why the turn lost its lease (its first reason).
func (t *turn) markLost(err error) {
	e := error(state.ErrLost)
	if err != nil {
		e = &lostError{cause: err}
	}
	t.lost.CompareAndSwap(nil, &e)
}

// lostError is a turn that stops because its store cannot be reached:
// it is ErrLost (the exchange must stop) with the reason.
type lostError struct{ cause error }

func (e *lostError) Error() string {
	return "the conversation store cannot be reached, so the exchange stops (its last events may not be stored): " + e.cause.Error()
}

func (e *lostError) Unwrap() []error { return []error{state.ErrLost, e.cause} }

// check fails when the lease is lost or may have expired.
func (t *turn) check() error {
	if p := t.lost.Load(); p != nil {
		return *p
	}
	if time.Since(time.Unix(0, t.renewed.Load())) >= t.c.s.ttl {
		t.markLost(nil)
		return state.ErrLost
	}
	return nil
}

// renew extends the lease every third of its TTL until the turn ends;
// when the lease was lost, or could not be renewed for a whole TTL, the
// turn is lost.
func (t *turn) renew() {
	defer close(t.done)
	every := t.c.s.ttl / 3
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
		}
		sent := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), every)
		var b pgpool.Batch
		b.Queue(asyncSQL)
		b.Queue(renewSQL, t.c.args(t.holder, t.c.s.ttl.Seconds())...)
		br := t.c.s.pool.SendBatch(ctx, &b)
		_, err := br.Exec()
		var tag pgconn.CommandTag
		if err == nil {
			tag, err = br.Exec()
		}
		if cerr := br.Close(); err == nil {
			err = cerr
		}
		cancel()
		switch {
		case err == nil && tag.RowsAffected() == 1:
			t.renewed.Store(sent.UnixNano())
		case err == nil:
			t.markLost(nil)
			return
		case time.Since(time.Unix(0, t.renewed.Load())) >= t.c.s.ttl:
			t.markLost(t.c.s.fail("renew the lease of "+t.c.n.display, err))
			return
		}
	}
}

// statementTimeout bounds a turn's writes (a large kept output on a
// loaded server takes seconds). The lease is checked and locked when a
// write starts; a write that outlasts it keeps it locked, so nobody takes
// the conversation over meanwhile, and the turn learns at its next
// renewal that it expired.
const statementTimeout = time.Minute

func (t *turn) timeout() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), max(t.c.s.ttl, statementTimeout))
}

// Append stores events in one transaction that checks the lease.
func (t *turn) Append(events ...state.Event) error {
	if len(events) == 0 {
		return nil
	}
	if err := t.check(); err != nil {
		return err
	}
	data, err := t.c.encode(events)
	if err != nil {
		return err
	}
	ctx, cancel := t.timeout()
	defer cancel()
	var n int
	if err := t.c.s.pool.QueryRow(ctx, appendSQL, t.c.args(t.holder, len(events), data)...).Scan(&n); err != nil {
		// Whether it committed is unknown: the turn cannot go on.
		t.markLost(t.c.s.fail("append to "+t.c.n.display, err))
		return *t.lost.Load()
	}
	if n == 0 {
		t.markLost(nil)
		return state.ErrLost
	}
	t.events = append(t.events, events...)
	return nil
}

// KeepOutput stores a tool's whole output under the lease; where names
// the conversation and the output.
func (t *turn) KeepOutput(id, text string) (string, error) {
	if err := t.check(); err != nil {
		return "", err
	}
	data := []byte(text)
	if t.c.n.sealed {
		enc, err := t.c.s.cipher.Encrypt(data)
		if err != nil {
			return "", err
		}
		data = []byte(enc)
	}
	ctx, cancel := t.timeout()
	defer cancel()
	var n int
	if err := t.c.s.pool.QueryRow(ctx, keepSQL, t.c.args(t.holder, t.c.outputName(id), data)...).Scan(&n); err != nil {
		return "", t.c.s.fail("keep an output in "+t.c.n.display, err)
	}
	if n == 0 {
		t.markLost(nil)
		return "", state.ErrLost
	}
	return t.c.Location() + ", output " + state.OutputName(id), nil
}

// End stops the renewals and releases the lease.
func (t *turn) End() {
	t.endOnce.Do(func() {
		close(t.stop)
		<-t.done
		t.c.release(t.holder)
	})
}

// listen starts, once, the connection that listens for released leases.
// Without it (the database unreachable) waiters still poll.
func (s *Store) listen() {
	s.listening.Do(func() {
		go func() {
			defer close(s.stopped)
			pglisten.Listen(s.ctx, s.pool.Config().Conn, channel, time.Second, s.wake.Wake, nil)
		}()
	})
}

// List returns a bot's conversations, most recent first; those of
// another password (or none) are counted as unreadable.
func (s *Store) List(ctx context.Context, b state.Bot) (state.Listing, error) {
	var out state.Listing
	path, err := state.BotPath(b)
	if err != nil {
		return out, err
	}
	rows, err := s.pool.Query(ctx, `SELECT sealed, end_user, key, events, updated_at FROM nb_conversations
		WHERE bot = $1 AND events > 0 ORDER BY updated_at DESC`, path)
	if err != nil {
		return out, s.fail("list the conversations of "+path, ctxErr(ctx, err))
	}
	defer rows.Close()
	for rows.Next() {
		var (
			sealed       bool
			endUser, key []byte
			k            state.KeyInfo
		)
		if err := rows.Scan(&sealed, &endUser, &key, &k.Events, &k.LastActivity); err != nil {
			return out, s.fail("list the conversations of "+path, err)
		}
		if sealed != (s.cipher != nil) {
			out.Unreadable++
			continue
		}
		if sealed {
			u, err1 := s.cipher.Decrypt(string(endUser))
			kk, err2 := s.cipher.Decrypt(string(key))
			if err1 != nil || err2 != nil {
				out.Unreadable++
				continue
			}
			endUser, key = u, kk
		}
		k.EndUser, k.Key = string(endUser), string(key)
		out.Keys = append(out.Keys, k)
	}
	if err := rows.Err(); err != nil {
		return out, s.fail("list the conversations of "+path, ctxErr(ctx, err))
	}
	return out, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) //nolint:errcheck // never fails
	return hex.EncodeToString(b)
}

var (
	_ state.TailBeginner = (*conversation)(nil)
	_ state.Enumerator   = (*Store)(nil)
	_ state.OutputLister = (*conversation)(nil)
	_ state.Backdater    = (*conversation)(nil)
)

// SetLastActivity sets when the conversation was last written.
func (c *conversation) SetLastActivity(ctx context.Context, at time.Time) error {
	if _, err := c.s.pool.Exec(ctx, `UPDATE nb_conversations SET updated_at = $5
		WHERE bot = $1 AND sealed = $2 AND end_user = $3 AND key = $4`, c.args(at)...); err != nil {
		return c.s.fail("set the time of "+c.n.display, ctxErr(ctx, err))
	}
	return nil
}

// Bots lists the bots with stored conversations.
func (s *Store) Bots(ctx context.Context) ([]state.Bot, error) {
	rows, err := s.pool.Query(ctx, "SELECT DISTINCT bot FROM nb_conversations ORDER BY bot")
	if err != nil {
		return nil, s.fail("list the bots", ctxErr(ctx, err))
	}
	paths, err := pgpool.Column[string](rows, nil)
	if err != nil {
		return nil, s.fail("list the bots", ctxErr(ctx, err))
	}
	out := make([]state.Bot, 0, len(paths))
	for _, p := range paths {
		b, err := state.BotFromPath(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.place, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// Outputs lists the names of the kept outputs.
func (c *conversation) Outputs(ctx context.Context) ([]string, error) {
	rows, err := c.s.pool.Query(ctx, `SELECT o.name FROM nb_outputs o JOIN nb_conversations c ON c.id = o.conversation
		WHERE c.bot = $1 AND c.sealed = $2 AND c.end_user = $3 AND c.key = $4 ORDER BY o.name`, c.args()...)
	if err != nil {
		return nil, c.s.fail("list the outputs of "+c.n.display, ctxErr(ctx, err))
	}
	names, err := pgpool.Column[[]byte](rows, nil)
	if err != nil {
		return nil, c.s.fail("list the outputs of "+c.n.display, ctxErr(ctx, err))
	}
	out := make([]string, len(names))
	for i, n := range names {
		if c.n.sealed {
			plain, err := c.s.cipher.Decrypt(string(n))
			if err != nil {
				return nil, fmt.Errorf("%s: an output's name: %w", c.Location(), err)
			}
			n = plain
		}
		out[i] = string(n)
	}
	return out, nil
}
