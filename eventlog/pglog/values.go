package pglog

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nbots/nb/eventlog"
	"github.com/nbots/nb/internal/pgpool"
)

// Put implements eventlog.Shared.
func (s *Store) Put(ctx context.Context, kind, id, owner string, value []byte, sum eventlog.Summary, lim eventlog.Limits) error {
	if err := s.Err(); err != nil {
		return err
	}
	summary, err := json.Marshal(sum)
	if err != nil {
		return fmt.Errorf("encode the summary of a %s: %w", kind, err)
	}
	s.setLimits(kind, lim)
	_, err = s.pool.Exec(ctx, `INSERT INTO nb_serve_values (kind, id, owner, value, summary, put, expires) VALUES ($1, $2, $3, $4, $6, now(), now() + $5::interval)
		ON CONFLICT (kind, id) DO UPDATE SET owner = $3, value = $4, summary = $6, put = now(), expires = now() + $5::interval`,
		kind, id, owner, value, lim.TTL, summary)
	return s.failed(err)
}

// List implements eventlog.Shared: one query on the index of kind and
// put, which reads no value.
func (s *Store) List(ctx context.Context, kind string, limit int) ([]eventlog.Entry, error) {
	if err := s.Err(); err != nil {
		return nil, err
	}
	limit = min(max(limit, 1), eventlog.MaxList)
	rows, err := s.pool.Query(ctx, `SELECT id, owner, put, octet_length(value), summary FROM nb_serve_values
		WHERE kind = $1 AND expires > now() ORDER BY put DESC, id LIMIT $2`, kind, limit)
	if err != nil {
		return nil, s.failed(err)
	}
	defer rows.Close()
	var out []eventlog.Entry
	for rows.Next() {
		var e eventlog.Entry
		var summary []byte
		if err := rows.Scan(&e.ID, &e.Owner, &e.Put, &e.Size, &summary); err != nil {
			return nil, s.failed(err)
		}
		if len(summary) > 0 {
			if err := json.Unmarshal(summary, &e.Summary); err != nil {
				return nil, fmt.Errorf("the summary of %s %s in the shared store cannot be read: %w", kind, e.ID, err)
			}
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, s.failed(err)
	}
	return out, nil
}

// Get implements eventlog.Shared.
func (s *Store) Get(ctx context.Context, kind, id, owner string) ([]byte, error) {
	if err := s.Err(); err != nil {
		return nil, err
	}
	var v []byte
	err := s.pool.QueryRow(ctx, `SELECT value FROM nb_serve_values WHERE kind = $1 AND id = $2 AND owner = $3 AND expires > now()`, kind, id, owner).Scan(&v)
	if errors.Is(err, pgpool.ErrNoRows) {
		return nil, eventlog.ErrUnknown
	}
	if err != nil {
		return nil, s.failed(err)
	}
	return v, nil
}

// Delete implements eventlog.Shared.
func (s *Store) Delete(ctx context.Context, kind, id, owner string) (bool, error) {
	if err := s.Err(); err != nil {
		return false, err
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM nb_serve_values WHERE kind = $1 AND id = $2 AND owner = $3 AND expires > now()`, kind, id, owner)
	if err != nil {
		return false, s.failed(err)
	}
	return tag.RowsAffected() > 0, nil
}

func (s *Store) setLimits(kind string, lim eventlog.Limits) {
	s.mu.Lock()
	s.limits[kind] = lim
	s.mu.Unlock()
}

// janitor deletes what expired, keeps each kind within the limits its
// writers gave, and fails the open logs of replicas that are gone. Every
// replica runs it; each statement is right whoever runs it first.
func (s *Store) janitor() {
	if s.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.sweep(ctx); err != nil {
		s.opts.Log.Warn("could not clean the shared store", "error", err.Error())
	}
}

func (s *Store) sweep(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM nb_serve_values WHERE expires <= now()`); err != nil {
		return s.failed(err)
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM nb_serve_logs WHERE expires <= now()`); err != nil {
		return s.failed(err)
	}
	if err := s.failLost(ctx, ""); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM nb_serve_replicas WHERE seen < now() - interval '1 day'`); err != nil {
		return s.failed(err)
	}
	s.mu.Lock()
	limits := make(map[string]eventlog.Limits, len(s.limits))
	for k, v := range s.limits {
		limits[k] = v
	}
	s.mu.Unlock()
	for kind, lim := range limits {
		if err := s.trim(ctx, kind, lim); err != nil {
			return err
		}
	}
	return nil
}

// trim forgets the oldest entries of kind beyond lim's count or bytes:
// of the logs, only the ended ones (an open log is bounded by its
// writer, which fails it when it must forget it).
func (s *Store) trim(ctx context.Context, kind string, lim eventlog.Limits) error {
	count, bytes := int64(lim.Count), lim.Bytes
	if count <= 0 {
		count = 1 << 62
	}
	if bytes <= 0 {
		bytes = 1 << 62
	}
	var err error
	if kind == logKind {
		_, err = s.pool.Exec(ctx, `DELETE FROM nb_serve_logs WHERE id IN (
			SELECT id FROM (SELECT id, row_number() OVER w AS n, sum(text_len) OVER w AS b FROM nb_serve_logs WHERE status <> 0
				WINDOW w AS (ORDER BY finished DESC, id)) x WHERE n > $1 OR b > $2)`, count, bytes)
	} else {
		_, err = s.pool.Exec(ctx, `DELETE FROM nb_serve_values WHERE kind = $1 AND id IN (
			SELECT id FROM (SELECT id, row_number() OVER w AS n, sum(octet_length(value)) OVER w AS b FROM nb_serve_values WHERE kind = $1
				WINDOW w AS (ORDER BY put DESC, id)) x WHERE n > $2 OR b > $3)`, kind, count, bytes)
	}
	return s.failed(err)
}
