package pgurl

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestIs(t *testing.T) {
	for in, want := range map[string]bool{
		"postgres://h/db": true, "postgresql://u@h/db": true, "POSTGRES://h": true, " postgres://h ": true,
		"": false, "/var/lib/nb": false, "nats://h": false, "postgres:h": false, "file:///x": false,
	} {
		if got := Is(in); got != want {
			t.Errorf("Is(%q) = %v", in, got)
		}
	}
}

func TestRedactAndPlace(t *testing.T) {
	for _, tc := range []struct{ in, redact, place string }{
		{"postgres://nb:s3cr%40t@db.example:5432/nb?sslmode=disable", "postgres://nb:xxxxx@db.example:5432/nb?sslmode=disable", "postgres://db.example:5432/nb"},
		{"postgresql://db/nb?user=u&password=hunter2", "postgresql://db/nb?password=xxxxx&user=u", "postgres://db/nb"},
		{"postgres://u@db/nb", "postgres://u@db/nb", "postgres://db/nb"},
		{"postgres://u:p@[::1/nb", "(a URL that cannot be parsed)", "postgres://(a URL that cannot be parsed)"},
	} {
		if got := Redact(tc.in); got != tc.redact {
			t.Errorf("Redact(%q) = %q, want %q", tc.in, got, tc.redact)
		}
		if got := Place(tc.in); got != tc.place {
			t.Errorf("Place(%q) = %q, want %q", tc.in, got, tc.place)
		}
	}
}

func TestScrub(t *testing.T) {
	raw := "postgres://nb:p%40ss@h/db?sslpassword=k3y"
	err := Scrub(fmt.Errorf("wrapped: %w", errors.New("user nb password p@ss, escaped p%40ss, key k3y")), raw)
	if strings.Contains(err.Error(), "p@ss") || strings.Contains(err.Error(), "p%40ss") || strings.Contains(err.Error(), "k3y") {
		t.Errorf("Scrub left a credential: %v", err)
	}
	if Scrub(nil, raw) != nil {
		t.Error("Scrub(nil) is not nil")
	}
	ctxErr := Scrub(fmt.Errorf("x: %w", context.Canceled), raw)
	if !errors.Is(ctxErr, context.Canceled) {
		t.Error("Scrub broke errors.Is")
	}
}

// TestOpen: a pool opens on a real database; the errors of a wrong
// password, a closed port and a bad URL never carry the password.
func TestOpen(t *testing.T) {
	ctx := context.Background()
	good := pgtest.New(t)
	pool, err := Open(ctx, good+"&pool_max_conns=2&pool_max_conn_idle_time=5m", "nb-test")
	if err != nil {
		t.Fatal(err)
	}
	if cfg := pool.Config(); cfg.MaxConns != 2 || cfg.MaxConnIdleTime != 5*time.Minute {
		t.Errorf("the URL's pool parameters were not read: %+v", cfg)
	}
	var app string
	if err := pool.QueryRow(ctx, "SHOW application_name").Scan(&app); err != nil || app != "nb-test" {
		t.Errorf("application_name = %q, %v", app, err)
	}
	pool.Close()

	u, _ := url.Parse(good)
	pw, _ := u.User.Password()
	wrong := *u
	wrong.User = url.UserPassword("nb", "wrong-"+pw)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := *u
	closed.Host = l.Addr().String()
	l.Close()
	for _, raw := range []string{wrong.String(), closed.String(), good + "&connect_timeout=abc", good + "&pool_min_conns=1", good + "&pool_max_conns=0", strings.Replace(good, "postgres://", "nats://", 1)} {
		_, err := Open(ctx, raw, "nb-test")
		if err == nil {
			t.Errorf("Open(%s) succeeded", Redact(raw))
			continue
		}
		if strings.Contains(err.Error(), pw) {
			t.Errorf("the error carries the password: %v", err)
		}
		t.Log(err)
	}
}
