package server

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func ids(models []Model) []string {
	var out []string
	for _, m := range models {
		out = append(out, m.ID)
	}
	return out
}

func TestCatalogIDsAndFailures(t *testing.T) {
	f := newFixture(t, map[string]string{
		"writer.yml":          cart("Writer"),
		"team/translator.yml": cart("Translator"),
		"team/translator.md":  "```yaml\n" + cart("Shadowed by the .yml") + "```\n",
		"broken.yml":          "meta: {name: Broken}\nprovider: {id: nope}\n",
		"syntax.yaml":         "meta: [\n",
		"nokey.yml":           "meta: {name: No key}\nprovider: {id: openai, credentials: {access-token: ENV/MISSING_KEY}}\n",
		"README.md":           "# My cartridges\n\nProse only.\n",
		"pages/page.yml":      "description: a robopage\nfunctions: {f: {description: x, cmdline: [echo]}}\n",
		".hidden/secret.yml":  cart("Hidden"),
		"notes.txt":           "not a cartridge",
	}, nil)
	models := f.srv.Models(context.Background())
	want := []string{"-", "broken", "nokey", "syntax", "team/translator", "writer"}
	if got := ids(models); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("ids %v, want %v", got, want)
	}
	byID := map[string]Model{}
	for _, m := range models {
		byID[m.ID] = m
	}
	if m := byID["team/translator"]; m.Cartridge.Meta().Name != "Translator" || m.Bot == nil || m.Err != nil {
		t.Errorf("team/translator: %+v", m)
	}
	for _, id := range []string{"broken", "nokey", "syntax"} {
		if byID[id].Err == nil || byID[id].Bot != nil {
			t.Errorf("%s loaded: %+v", id, byID[id])
		}
	}
	if byID["nokey"].Cartridge == nil || !strings.Contains(byID["nokey"].Err.Error(), "MISSING_KEY") {
		t.Errorf("a cartridge that parses but cannot run keeps its meta and says why: %+v", byID["nokey"])
	}
	if !strings.Contains(f.log.String(), "cartridge failed to load") || !strings.Contains(f.log.String(), "broken.yml:2") {
		t.Errorf("the log does not report the broken cartridge:\n%s", f.log)
	}
	// Bot's errors carry their status.
	for id, status := range map[string]int{"nope": 404, "broken": 500, "writer": 0, "-": 0} {
		_, err := f.srv.Bot(context.Background(), id)
		var se *Error
		switch {
		case status == 0 && err != nil:
			t.Errorf("Bot(%q): %v", id, err)
		case status != 0 && (!errors.As(err, &se) || se.StatusCode() != status):
			t.Errorf("Bot(%q) = %v, want status %d", id, err, status)
		}
	}
	_, err := f.srv.Bot(context.Background(), "broken")
	if !strings.Contains(err.Error(), "broken.yml:2") {
		t.Errorf("the load error does not say where: %v", err)
	}
}

func TestCatalogFirstFolderWins(t *testing.T) {
	second := t.TempDir()
	write(t, second, map[string]string{"writer.yml": cart("Second writer"), "other.yml": cart("Other")})
	f := newFixture(t, map[string]string{"writer.yml": cart("First writer")}, func(o *Options) {
		o.Dirs = append(o.Dirs, second, filepath.Join(second, "missing"))
	})
	m, err := f.srv.Model(context.Background(), "writer")
	if err != nil || m.Cartridge.Meta().Name != "First writer" {
		t.Fatalf("writer = %v, %v", m.Cartridge.Meta().Name, err)
	}
	if _, err := f.srv.Model(context.Background(), "other"); err != nil {
		t.Fatal(err)
	}
}

// A cartridge whose id is "default" answers for "-" and hides the
// built-in one, as in the reference.
func TestDefaultOverride(t *testing.T) {
	f := newFixture(t, map[string]string{"Default.yml": cart("My default")}, nil)
	b, err := f.srv.Bot(context.Background(), "-")
	if err != nil || b.Cartridge.Meta().Name != "My default" {
		t.Fatalf("- = %v, %v", b, err)
	}
	if got := ids(f.srv.Models(context.Background())); strings.Join(got, " ") != "Default" {
		t.Fatalf("models %v", got)
	}
}

// The watcher finds changes by itself.
func TestWatch(t *testing.T) {
	f := newFixture(t, map[string]string{"a.yml": cart("A")}, func(o *Options) { o.WatchInterval = 20 * time.Millisecond })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go f.srv.Catalog().Watch(ctx, f.srv.opts.WatchInterval)
	write(t, f.dir, map[string]string{"new.yml": cart("New")})
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := f.srv.Model(ctx, "new"); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the new cartridge was not picked up")
}

// A token sees and runs only its cartridges.
func TestTokenCartridges(t *testing.T) {
	tok, _ := NewToken("team", strings.Repeat("t", 20))
	tok.Cartridges = []string{"team/*"}
	f := newFixture(t, map[string]string{"team/a.yml": cart("A"), "private.yml": cart("P")}, func(o *Options) { o.Tokens = []*Token{tok} })
	ctx := context.WithValue(context.Background(), infoKey{}, &reqInfo{token: tok})
	if got := ids(f.srv.Models(ctx)); strings.Join(got, " ") != "team/a" {
		t.Fatalf("models %v", got)
	}
	for id, status := range map[string]int{"private": http.StatusForbidden, "-": http.StatusForbidden, "nope": http.StatusNotFound} {
		_, err := f.srv.Bot(ctx, id)
		var se *Error
		if !errors.As(err, &se) || se.StatusCode() != status {
			t.Errorf("Bot(%q) = %v, want %d", id, err, status)
		}
	}
}

// Served cartridges read the server's environment, but never its
// NANO_BOTS_END_USER: the end user of a served exchange is the client.
func TestEndUserNotFromEnvironment(t *testing.T) {
	f := newFixture(t, nil, func(o *Options) {
		o.Host.Environ = append(o.Host.Environ, "NANO_BOTS_END_USER=operator")
	})
	b, err := f.srv.Bot(context.Background(), "-")
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Cartridge.String("provider", "settings", "user"); got != "" {
		t.Fatalf("the default cartridge's user is %q", got)
	}
	if got := b.Host().EndUser(b.Cartridge, "1.2.3.4-vscode-me"); got != "1.2.3.4-vscode-me" {
		t.Fatalf("end user %q", got)
	}
}
