package discord

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"strconv"
	"sync"
	"time"

	"github.com/nbots/nb/internal/keylock"
	"github.com/nbots/nb/internal/retryafter"
)

// apiVersion is the version of Discord's API (REST and Gateway) the
// channel speaks.
const apiVersion = "10"

// userAgent is the form Discord asks of bots: "DiscordBot ($url,
// $versionNumber)".
const userAgent = "DiscordBot (https://github.com/nbots/nb, 1)"

// rest is a client of the few REST routes the channel calls. It keeps
// Discord's rate limits as its X-RateLimit-* headers describe them: a
// request waits while its bucket (per route and channel) has no request
// left until the bucket's reset, or while a global limit holds. A 429 is
// returned as *rateLimited with retry_after, and its bucket waits that
// long; the caller decides whether to try again. Requests of one route
// to one channel go one at a time, each after the previous one's
// headers are read, as Discord's documentation asks of a client that
// does not know a bucket yet.
type rest struct {
	base string // https://discord.com/api/v10
	auth string // "Bot <token>"
	hc   *http.Client

	mu      sync.Mutex
	hashes  map[string]string  // route -> the bucket's hash Discord named
	buckets map[string]*bucket // hash (or route) + major parameter -> state
	global  time.Time          // no request before (a global 429)
	sweepAt int                // the number of buckets at which sweep runs

	// turns are the locks of route + major parameter: one request at a
	// time each, kept only while a request holds or waits for one.
	turns keylock.Map[string]
}

// bucket is what the headers said of one rate-limit bucket.
type bucket struct {
	remaining int
	reset     time.Time
}

// apiError is a REST answer other than 2xx: its status and Discord's
// JSON error (message and code), when there is one.
type apiError struct {
	Status  int
	Code    int
	Message string
}

func (e *apiError) Error() string {
	if e.Message != "" {
		return fmt.Sprintf("%d %s (code %d)", e.Status, e.Message, e.Code)
	}
	return fmt.Sprintf("%d %s", e.Status, http.StatusText(e.Status))
}

// rateLimited is a 429: the request may be tried again after After.
type rateLimited struct {
	After  time.Duration
	Global bool
}

func (e *rateLimited) Error() string {
	return fmt.Sprintf("429 too many requests (retry after %s)", e.After.Round(time.Millisecond))
}

// request is one REST call: route names its rate limit ("POST
// /channels/{id}/messages"), major is the route's major parameter (the
// channel id) that gives each channel its own bucket.
type request struct {
	method, path, route, major string
	query                      string
	contentType                string
	body                       []byte
}

func (r *rest) key(route, major string) string {
	if h, ok := r.hashes[route]; ok {
		return h + ":" + major
	}
	return route + ":" + major
}

// wait blocks until the request's bucket and the global limit allow it,
// and spends one request of the bucket.
func (r *rest) wait(ctx context.Context, q *request) error {
	for {
		now := time.Now()
		r.mu.Lock()
		until := r.global
		if b := r.buckets[r.key(q.route, q.major)]; b != nil {
			switch {
			case !b.reset.After(now):
				delete(r.buckets, r.key(q.route, q.major)) // a new window: unknown until answered
			case b.remaining <= 0:
				until = later(until, b.reset)
			case !until.After(now):
				b.remaining--
			}
		}
		r.mu.Unlock()
		d := until.Sub(now)
		if d <= 0 {
			return nil
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// learn records what an answer's headers say of its bucket.
func (r *rest) learn(q *request, h http.Header) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// Read under the lock, so that the buckets' resets are in the order
	// they are recorded and a sweep forgets every window that passed.
	now := time.Now()
	if r.hashes == nil {
		r.hashes, r.buckets = map[string]string{}, map[string]*bucket{}
	}
	if hash := h.Get("X-RateLimit-Bucket"); hash != "" && r.hashes[q.route] != hash {
		delete(r.buckets, r.key(q.route, q.major))
		r.hashes[q.route] = hash
	}
	remaining, err1 := strconv.Atoi(h.Get("X-RateLimit-Remaining"))
	after, err2 := strconv.ParseFloat(h.Get("X-RateLimit-Reset-After"), 64)
	if err1 != nil || err2 != nil || remaining < 0 || after < 0 {
		return
	}
	r.buckets[r.key(q.route, q.major)] = &bucket{remaining: remaining, reset: now.Add(retryafter.Seconds(after, 0, maxRetryAfter))}
	r.sweepLocked(now)
}

// sweepLocked forgets the buckets whose window has passed (what Discord
// said of them no longer holds) once there are sweepAt of them, and sets
// sweepAt to twice the buckets left (at least 256): a bot that has
// answered in many channels keeps the state of the busy ones only, at a
// cost spread over the answers.
func (r *rest) sweepLocked(now time.Time) {
	if len(r.buckets) < max(r.sweepAt, 256) {
		return
	}
	for k, b := range r.buckets {
		if !b.reset.After(now) {
			delete(r.buckets, k)
		}
	}
	r.sweepAt = 2 * len(r.buckets)
}

// limited records a 429: the bucket, or every request if it is global,
// waits retry_after.
func (r *rest) limited(q *request, rl *rateLimited) {
	until := time.Now().Add(rl.After)
	r.mu.Lock()
	defer r.mu.Unlock()
	if rl.Global {
		r.global = later(r.global, until)
		return
	}
	if r.buckets == nil {
		r.hashes, r.buckets = map[string]string{}, map[string]*bucket{}
	}
	r.buckets[r.key(q.route, q.major)] = &bucket{remaining: 0, reset: until}
	r.sweepLocked(time.Now())
}

// maxRetryAfter caps a wait Discord asks for: a 429's retry_after (or
// Retry-After), a bucket's X-RateLimit-Reset-After.
const maxRetryAfter = time.Hour

// take takes the route's and channel's turn (one request at a time) and
// returns its release.
func (r *rest) take(ctx context.Context, q *request) (func(), error) {
	return r.turns.Lock(ctx, q.route+":"+q.major)
}

// do sends q when its bucket allows and decodes a 2xx answer's JSON into
// out (nil: the body is not read).
func (r *rest) do(ctx context.Context, q request, out any) error {
	release, err := r.take(ctx, &q)
	if err != nil {
		return err
	}
	defer release()
	if err := r.wait(ctx, &q); err != nil {
		return err
	}
	u := r.base + q.path
	if q.query != "" {
		u += "?" + q.query
	}
	var body io.Reader
	if q.body != nil {
		body = bytes.NewReader(q.body)
	}
	req, err := http.NewRequestWithContext(ctx, q.method, u, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", r.auth)
	req.Header.Set("User-Agent", userAgent)
	if q.contentType != "" {
		req.Header.Set("Content-Type", q.contentType)
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	r.learn(&q, resp.Header)
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		rl := &rateLimited{Global: resp.Header.Get("X-RateLimit-Global") == "true"}
		var e struct {
			RetryAfter float64 `json:"retry_after"`
			Global     bool    `json:"global"`
		}
		if json.Unmarshal(b, &e) == nil && e.RetryAfter > 0 {
			rl.After, rl.Global = retryafter.Seconds(e.RetryAfter, 0, maxRetryAfter), rl.Global || e.Global
		} else {
			rl.After = retryafter.Header(resp.Header.Get("Retry-After"), time.Now(), 0, maxRetryAfter)
		}
		r.limited(&q, rl)
		return rl
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		ae := &apiError{Status: resp.StatusCode}
		var e struct {
			Message string `json:"message"`
			Code    int    `json:"code"`
		}
		if json.Unmarshal(b, &e) == nil {
			ae.Message, ae.Code = e.Message, e.Code
		}
		return ae
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: the answer is not the JSON expected: %w", q.method, q.route, err)
	}
	return nil
}

// jsonRequest is q with v as its JSON body.
func jsonRequest(q request, v any) (request, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return q, err
	}
	q.body, q.contentType = b, "application/json"
	return q, nil
}

// file is a file uploaded with a message.
type file struct {
	Name, Type string
	Data       []byte
}

// multipartRequest is q with a multipart/form-data body: v's JSON in the
// payload_json field and each file in a files[n] field, as Discord's
// uploads are made.
func multipartRequest(q request, v any, files []file) (request, error) {
	payload, err := json.Marshal(v)
	if err != nil {
		return q, err
	}
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="payload_json"`)
	h.Set("Content-Type", "application/json")
	p, err := w.CreatePart(h)
	if err != nil {
		return q, err
	}
	p.Write(payload) //nolint:errcheck // a bytes.Buffer
	for i, f := range files {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", mime.FormatMediaType("form-data", map[string]string{"name": fmt.Sprintf("files[%d]", i), "filename": f.Name}))
		ct := f.Type
		if ct == "" {
			ct = "application/octet-stream"
		}
		h.Set("Content-Type", ct)
		p, err := w.CreatePart(h)
		if err != nil {
			return q, err
		}
		p.Write(f.Data) //nolint:errcheck // a bytes.Buffer
	}
	if err := w.Close(); err != nil {
		return q, err
	}
	q.body, q.contentType = buf.Bytes(), w.FormDataContentType()
	return q, nil
}

// errStatus is an error's HTTP status, 0 if it has none.
func errStatus(err error) int {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}
