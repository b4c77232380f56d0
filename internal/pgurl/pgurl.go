// Package pgurl reads the PostgreSQL URLs that nb's stores are given
// (--store, NB_STORE): it tells them from other stores, says where they
// point without their credentials, and opens a pool on them (package
// pgpool) whose
// errors never carry the password. Every PostgreSQL user of nb (the
// conversation store, nb serve's shared state) opens its pool here.
package pgurl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/nbots/nb/internal/pgpool"
)

// Is reports whether raw is a PostgreSQL URL (postgres:// or
// postgresql://).
func Is(raw string) bool {
	scheme, _, ok := strings.Cut(strings.TrimSpace(raw), "://")
	return ok && (strings.EqualFold(scheme, "postgres") || strings.EqualFold(scheme, "postgresql"))
}

// redacted replaces a password.
const redacted = "xxxxx"

// Redact returns raw with its password (in the user part or a password
// parameter) replaced by xxxxx, for messages and logs. A URL that cannot
// be parsed is not echoed at all.
func Redact(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "(a URL that cannot be parsed)"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), redacted)
	}
	q := u.Query()
	changed := false
	for k := range q {
		if isSecretParam(k) {
			q.Set(k, redacted)
			changed = true
		}
	}
	if changed {
		u.RawQuery = q.Encode()
	}
	return u.String()
}

func isSecretParam(k string) bool {
	k = strings.ToLower(k)
	return k == "password" || k == "sslpassword" || strings.Contains(k, "passfile") || k == "sslkey"
}

// Place says where raw points, for people: postgres://host:port/database,
// without the user, the password or the parameters.
func Place(raw string) string {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return "postgres://(a URL that cannot be parsed)"
	}
	out := url.URL{Scheme: "postgres", Host: u.Host, Path: u.Path}
	return out.String()
}

// secrets are the credentials of raw, to be scrubbed from messages.
func secrets(raw string) []string {
	var out []string
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		// Nothing can be said about it: hide the whole text.
		return []string{strings.TrimSpace(raw)}
	}
	if pw, ok := u.User.Password(); ok && pw != "" {
		out = append(out, pw, url.QueryEscape(pw), url.PathEscape(pw))
	}
	for k, vs := range u.Query() {
		if isSecretParam(k) {
			for _, v := range vs {
				if v != "" {
					out = append(out, v, url.QueryEscape(v))
				}
			}
		}
	}
	return out
}

// Error is an error whose message had the credentials of a URL taken
// out. Unwrap gives the original, for errors.Is; print this one.
type Error struct {
	msg string
	err error
}

func (e *Error) Error() string { return e.msg }

// Unwrap returns the original error.
func (e *Error) Unwrap() error { return e.err }

// Scrub returns err with every credential of raw removed from its
// message (nil for nil).
func Scrub(err error, raw string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, s := range secrets(raw) {
		if s != "" {
			msg = strings.ReplaceAll(msg, s, redacted)
		}
	}
	return &Error{msg: msg, err: err}
}

// Open returns a pool on the database of raw (a PostgreSQL URL; libpq's
// parameters and the pool's, such as pool_max_conns, are read from it:
// see pgpool.ParseConfig) after checking
// that the database answers. app names the connections
// (application_name) unless the URL does. Errors name the database by its
// Place, never its credentials.
func Open(ctx context.Context, raw, app string) (*pgpool.Pool, error) {
	if !Is(raw) {
		return nil, fmt.Errorf("%s is not a PostgreSQL URL (postgres://user:password@host:port/database)", Redact(raw))
	}
	cfg, err := pgpool.ParseConfig(strings.TrimSpace(raw))
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL URL %s: %w", Redact(raw), Scrub(unwrapParse(err), raw))
	}
	if app != "" {
		if _, ok := cfg.Conn.RuntimeParams["application_name"]; !ok {
			cfg.Conn.RuntimeParams["application_name"] = app
		}
	}
	pool := pgpool.New(cfg)
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("PostgreSQL %s does not answer: %w", Place(raw), Scrub(err, raw))
	}
	return pool, nil
}

// unwrapParse drops pgconn's echo of the connection string from a parse
// error (it redacts the password, but the message is long and the
// caller names the URL already).
func unwrapParse(err error) error {
	if inner := errors.Unwrap(err); inner != nil {
		return inner
	}
	return err
}
