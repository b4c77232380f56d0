package pglog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nbots/nb/eventlog"
	"github.com/nbots/nb/internal/pglisten"
	"github.com/nbots/nb/internal/pgpool"
)

// maxChunk bounds the bytes of one row of output: a long burst is
// written as several.
const maxChunk = 1 << 20

// Publish implements eventlog.Shared: the log's row is written now, its
// output and state as they change, each write one round trip that also
// notifies the followers; what comes during a write goes in the next.
func (s *Store) Publish(ctx context.Context, id, owner string, l *eventlog.Log, lim eventlog.Limits, lost func(error)) error {
	if err := s.Err(); err != nil {
		return err
	}
	s.setLimits(logKind, lim)
	st := l.State()
	_, err := s.pool.Exec(ctx, `INSERT INTO nb_serve_logs (id, owner, replica, started, ttl) VALUES ($1, $2, $3, $4, $5)`,
		id, owner, s.opts.Replica, st.Started, lim.TTL)
	if err != nil {
		return s.failed(err)
	}
	s.wg.Add(1)
	go s.mirror(id, l, lim, lost)
	return nil
}

// mirror writes what l adds, until it ends and all is written, the log
// was failed by another replica, or the store closes.
func (s *Store) mirror(id string, l *eventlog.Log, lim eventlog.Limits, lost func(error)) {
	defer s.wg.Done()
	from := 0
	retry := 50 * time.Millisecond
	for {
		st := l.State()
		if st.TextLen > from || st.Status != eventlog.Open {
			if st.Status == eventlog.Open && s.opts.Batch > 0 {
				select { // gather what comes next into the same write
				case <-time.After(s.opts.Batch):
				case <-s.stop:
					return
				}
			}
			text, st := l.Peek(from)
			err := s.write(id, from, text, st)
			switch {
			case errors.Is(err, errTaken):
				if lost != nil {
					lost(&LostError{ID: id})
				}
				return
			case err != nil:
				s.opts.Log.Warn("could not write a stream's output to the shared store; retrying", "stream", id, "error", err.Error())
				select {
				case <-time.After(retry):
					retry = min(2*retry, 2*time.Second)
				case <-s.stop:
					return
				}
				continue
			}
			retry = 50 * time.Millisecond
			from += len(text)
			if st.Status != eventlog.Open {
				return
			}
			continue
		}
		select {
		case <-st.Changed:
		case <-s.stop:
			return
		}
	}
}

// errTaken says a published log was failed by another replica.
var errTaken = errors.New("the log was failed by another replica")

// LostError fails the exchange of a log the other replicas took for
// lost: this replica did not reach the store for too long.
type LostError struct{ ID string }

func (e *LostError) Error() string {
	return "this replica lost the shared store for too long: the other replicas took stream " + e.ID + " for lost, so it was stopped"
}

// write adds text at byte from and the state st, in one round trip.
func (s *Store) write(id string, from int, text string, st eventlog.State) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b := &pgpool.Batch{}
	for start := from; text != ""; {
		n := min(len(text), maxChunk)
		b.Queue(`INSERT INTO nb_serve_log_chunks (id, start, text) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, id, int64(start), []byte(text[:n]))
		start += n
		text = text[n:]
	}
	var finished *time.Time
	if st.Status != eventlog.Open {
		finished = &st.Finished
	}
	b.Queue(`UPDATE nb_serve_logs SET text_len = $3, status = $4::smallint, err = $5, cut = $6, finished = $7,
		expires = CASE WHEN $4::smallint <> 0 THEN now() + ttl END
		WHERE id = $1 AND replica = $2 AND status = 0`,
		id, s.opts.Replica, int64(st.TextLen), int16(st.Status), st.Err, st.Cut, finished)
	b.Queue(`SELECT pg_notify($1, $2)`, notifyChannel, id)
	br := s.pool.SendBatch(ctx, b)
	defer br.Close()
	for range b.Len() - 2 {
		if _, err := br.Exec(); err != nil {
			return s.failed(err)
		}
	}
	tag, err := br.Exec()
	if err != nil {
		return s.failed(err)
	}
	if _, err := br.Exec(); err != nil {
		return s.failed(err)
	}
	if err := br.Close(); err != nil {
		return s.failed(err)
	}
	if tag.RowsAffected() == 0 {
		return errTaken
	}
	return nil
}

// Follow implements eventlog.Shared.
func (s *Store) Follow(ctx context.Context, id, owner string, maxBytes int64) (*eventlog.Log, func(), error) {
	if err := s.Err(); err != nil {
		return nil, nil, err
	}
	var started time.Time
	err := s.pool.QueryRow(ctx, `SELECT started FROM nb_serve_logs WHERE id = $1 AND owner = $2 AND (expires IS NULL OR expires > now())`, id, owner).Scan(&started)
	if errors.Is(err, pgpool.ErrNoRows) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, s.failed(err)
	}
	f := &follower{s: s, id: id, l: eventlog.NewCopy(maxBytes, started), stop: make(chan struct{})}
	f.wake, f.unwatch = s.waiters.Register(id)
	ended, err := f.read(ctx)
	if err == nil && !ended {
		ended, err = f.checkWriter(ctx) // a log of a replica that is gone is not followed
	}
	if err != nil || ended {
		f.unwatch()
		if err != nil {
			return nil, nil, err
		}
		return f.l, func() {}, nil
	}
	s.wg.Add(1)
	go f.follow()
	return f.l, f.close, nil
}

// follower keeps a copy of a log up to date.
type follower struct {
	s    *Store
	id   string
	l    *eventlog.Log
	from int64
	// replica is the original's writer.
	replica string
	stop    chan struct{}
	wake    chan struct{} // of s.waiters
	unwatch func()
	touched time.Time
}

func (f *follower) close() {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
}

// read copies what the original added since the last read, and ends the
// copy when the original ended. All of it is one statement: one snapshot.
func (f *follower) read(ctx context.Context) (ended bool, err error) {
	rows, err := f.s.pool.Query(ctx, `SELECT l.replica, l.status, l.err, l.cut, l.finished, l.text_len, c.start, c.text
		FROM nb_serve_logs l LEFT JOIN nb_serve_log_chunks c ON c.id = l.id AND c.start >= $2
		WHERE l.id = $1 ORDER BY c.start`, f.id, f.from)
	if err != nil {
		return false, f.s.failed(err)
	}
	defer rows.Close()
	var (
		status   int16
		msg      string
		cut      bool
		finished *time.Time
		textLen  int64
		seen     bool
	)
	for rows.Next() {
		var start *int64
		var text []byte
		if err := rows.Scan(&f.replica, &status, &msg, &cut, &finished, &textLen, &start, &text); err != nil {
			return false, f.s.failed(err)
		}
		seen = true
		if start != nil && *start == f.from {
			f.l.WriteString(string(text)) //nolint:errcheck // never fails
			f.from += int64(len(text))
		}
	}
	if err := rows.Err(); err != nil {
		return false, f.s.failed(err)
	}
	if !seen {
		// Deleted (expired, or trimmed): the copy ends as the original did
		// not say; a reader sees it failed.
		f.l.End(eventlog.Failed, "this stream was forgotten by the shared store", time.Now(), false)
		return true, nil
	}
	if status != 0 && f.from >= textLen {
		at := time.Now()
		if finished != nil {
			at = *finished
		}
		f.l.End(eventlog.Status(status), msg, at, cut)
		return true, nil
	}
	return false, nil
}

// follow reads the original whenever it is notified of a change, or
// every Options.Poll, until the copy ends or is let go; it fails the
// original when its replica is gone, and says when the copy was read.
func (f *follower) follow() {
	defer f.s.wg.Done()
	defer f.unwatch()
	t := time.NewTicker(f.s.opts.Poll)
	defer t.Stop()
	lastCheck := time.Now()
	for {
		select {
		case <-f.wake:
		case <-t.C:
		case <-f.stop:
			return
		case <-f.s.stop:
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		ended, err := f.read(ctx)
		if err == nil && !ended {
			if f.l.Idle() < 2*f.s.opts.Poll && time.Since(f.touched) >= f.s.opts.Poll {
				f.touched = time.Now()
				_, err = f.s.pool.Exec(ctx, `UPDATE nb_serve_logs SET read = now() WHERE id = $1`, f.id)
				err = f.s.failed(err)
			}
			if err == nil && time.Since(lastCheck) >= f.s.opts.Poll {
				lastCheck = time.Now()
				ended, err = f.checkWriter(ctx)
			}
		}
		cancel()
		if ended {
			return
		}
		if err != nil {
			f.s.opts.Log.Warn("could not follow a stream in the shared store; retrying", "stream", f.id, "error", err.Error())
		}
	}
}

// checkWriter fails the original when its replica is gone before it
// ended, and ends the copy so.
func (f *follower) checkWriter(ctx context.Context) (bool, error) {
	alive, err := f.s.Alive(ctx, f.replica)
	if err != nil || alive {
		return false, err
	}
	if err := f.s.failLost(ctx, f.id); err != nil {
		return false, err
	}
	return f.read(ctx)
}

// lostMessage is the error of a log whose replica stopped before it
// ended; %s is the replica, %d the output's bytes that were kept.
const lostMessage = "the replica that ran this stream (%s) stopped before it finished: its output after byte %d is lost"

// failLost fails the open log id (or, with id "", every open log) of a
// replica that is gone.
func (s *Store) failLost(ctx context.Context, id string) error {
	_, err := s.pool.Exec(ctx, `UPDATE nb_serve_logs l SET status = 2, finished = now(), expires = now() + ttl,
		err = format($3, l.replica, l.text_len)
		FROM nb_serve_replicas r
		WHERE l.status = 0 AND ($1 = '' OR l.id = $1) AND r.id = l.replica AND r.seen < now() - $2::interval`,
		id, s.opts.DeadAfter, pgFormat(lostMessage))
	return s.failed(err)
}

// pgFormat turns a Go format of %s and %d into PostgreSQL's format().
func pgFormat(goFormat string) string {
	out := []byte{}
	for i := 0; i < len(goFormat); i++ {
		if goFormat[i] == '%' && i+1 < len(goFormat) && goFormat[i+1] == 'd' {
			out = append(out, '%', 's')
			i++
			continue
		}
		out = append(out, goFormat[i])
	}
	return string(out)
}

// LastRead implements eventlog.Shared: how long ago on the database's
// clock, taken from now on this one's.
func (s *Store) LastRead(ctx context.Context, id string) (time.Time, error) {
	var ago *time.Duration
	err := s.pool.QueryRow(ctx, `SELECT now() - read FROM nb_serve_logs WHERE id = $1`, id).Scan(&ago)
	if errors.Is(err, pgpool.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, s.failed(err)
	}
	if ago == nil {
		return time.Time{}, nil
	}
	return time.Now().Add(-*ago), nil
}

// listen holds a connection that listens for the logs' notifications
// and wakes their followers; it reconnects when the connection is lost.
func (s *Store) listen() {
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-s.stop
		cancel()
	}()
	pglisten.Listen(ctx, s.pool.Config().Conn, notifyChannel, s.opts.Heartbeat, s.waiters.Wake, func(err error) {
		s.opts.Log.Debug("shared store notifications lost; reconnecting", "error", fmt.Sprint(err))
		s.waiters.WakeAll() // a change may have been missed
	})
}
