package storeurl

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/nbots/nb/internal/pgtest"
	"github.com/nbots/nb/state"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestOpen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, "", Options{Root: dir, Password: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := s.Store.(state.Files); !ok || f.Root != dir || f.Cipher == nil || s.Shared || s.Ping(ctx) != nil {
		t.Errorf("the default store: %#v", s)
	}
	s, err = Open(ctx, "file://"+dir+"/x/../y", Options{Root: "/elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	if f, ok := s.Store.(metered).s.(state.Files); !ok || f.Root != dir+"/y" || f.Cipher != nil {
		t.Errorf("file URL: %#v", s.Store)
	}

	dbURL := pgtest.New(t)
	u, _ := url.Parse(dbURL)
	password, _ := u.User.Password()
	s, err = Open(ctx, " "+dbURL+" ", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !s.Shared || strings.Contains(s.Name, password) || !strings.Contains(s.Name, "nb:xxxxx@127.0.0.1") || s.Ping(ctx) != nil {
		t.Errorf("PostgreSQL store: %+v", s)
	}
	c, err := s.Open(state.Bot{Author: "a", Name: "b"}, "u", "k")
	if err != nil {
		t.Fatal(err)
	}
	if err := state.Append(ctx, c, state.Event{Who: state.RoleUser, Message: "hi"}); err != nil {
		t.Fatal(err)
	}

	wrong := *u
	wrong.User = url.UserPassword("nb", password+"-wrong")
	for _, raw := range []string{wrong.String(), "postgresql://nb:" + password + "@127.0.0.1:1/db", "mysql://nb:" + password + "@h/db", "file:relative/dir", "file://host/dir"} {
		_, err := Open(ctx, raw, Options{})
		if err == nil {
			t.Errorf("Open(%s) succeeded", raw)
			continue
		}
		if strings.Contains(err.Error(), password) || !strings.HasPrefix(err.Error(), "conversation store") {
			t.Errorf("Open's error: %v", err)
		}
	}
}
