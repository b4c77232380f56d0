package catalog_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/admission"
	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/catalog"
	"github.com/nbots/nb/internal/testbuf"
	_ "github.com/nbots/nb/provider/openai"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

// fixture is a catalog on a folder of cartridges whose provider is the
// OpenAI fake, with its log kept.
type fixture struct {
	dir  string
	cat  *catalog.Catalog
	fake *openaitest.Server
	log  *testbuf.Buffer
}

func cart(name string, extra ...string) string {
	return "meta: {name: " + name + ", author: Tests, version: 1.0.0}\n" +
		"provider: {id: openai, credentials: {address: ENV/OPENAI_API_ADDRESS, access-token: ENV/OPENAI_API_KEY}, settings: {model: m}}\n" +
		strings.Join(extra, "\n")
}

func write(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, src := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func newFixture(t *testing.T, files map[string]string) *fixture {
	t.Helper()
	f := &fixture{dir: t.TempDir(), fake: openaitest.New(providertest.Echo), log: &testbuf.Buffer{}}
	write(t, f.dir, files)
	fake := httptest.NewServer(f.fake) // the provider's side only
	t.Cleanup(fake.Close)
	environ := []string{"OPENAI_API_ADDRESS=" + fake.URL, "OPENAI_API_KEY=sk-test", "HOME=" + t.TempDir()}
	f.cat = catalog.New(context.Background(), catalog.Options{
		Dirs:   []string{f.dir},
		Host:   bot.Host{Environ: environ},
		Lookup: bot.Host{Environ: environ}.LookupEnv,
		Log:    slog.New(slog.NewTextHandler(f.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	t.Cleanup(func() { f.cat.Close() })
	return f
}

func ids(models []catalog.Model) string {
	var out []string
	for _, m := range models {
		out = append(out, m.ID)
	}
	return strings.Join(out, " ")
}

// A front-end without HTTP: a catalog of bots, a client filtered to its
// cartridges, runs admitted within a tenant's limits and refused with
// domain errors, an exchange run on a leased bot.
func TestCatalogAndAdmissionWithoutHTTP(t *testing.T) {
	f := newFixture(t, map[string]string{"team/writer.yml": cart("Writer"), "private.yml": cart("Private"), "broken.yml": "meta: [\n"})
	team := func(id string) bool { return strings.HasPrefix(id, "team/") }
	if got := ids(f.cat.Models(team, nil)); got != "team/writer" {
		t.Fatalf("the team sees %q", got)
	}
	var ce *catalog.Error
	for id, kind := range map[string]catalog.Kind{"private": catalog.NotAllowed, "nope": catalog.NotFound} {
		if _, err := f.cat.Bot(id, team, nil); !errors.As(err, &ce) || ce.Kind != kind {
			t.Errorf("Bot(%q) = %v, want kind %d", id, err, kind)
		}
	}
	if _, err := f.cat.Bot("broken", nil, nil); !errors.As(err, &ce) || ce.Kind != catalog.Broken || !strings.Contains(err.Error(), "broken.yml:1") {
		t.Errorf("Bot(broken) = %v", err)
	}

	adm := admission.New(admission.Limits{MaxRuns: 2})
	var tenant admission.Tenant
	policy := admission.Policy{MaxRuns: 1}
	run, err := adm.Admit(&tenant, policy)
	if err != nil {
		t.Fatal(err)
	}
	var ae *admission.Error
	if _, err := adm.Admit(&tenant, policy); !errors.As(err, &ae) || ae.Reason != admission.TenantBusy || ae.Limit != 1 {
		t.Fatalf("a second run of a one-run tenant: %v", err)
	}
	var leases catalog.Leases
	m, err := f.cat.Bot("team/writer", team, &leases)
	if err != nil {
		t.Fatal(err)
	}
	ctx := admission.NewContext(context.Background(), run)
	res, err := m.Bot.Ask(ctx, bot.Exchange{Mode: cartridge.Eval}, "hello")
	if err != nil || !strings.Contains(res.Text, "hello") {
		t.Fatalf("the exchange: %v, %v", res, err)
	}
	leases.Release()
	run.Done()
	if adm.Active() != 0 || tenant.Runs() != 0 {
		t.Fatalf("after the run: %d active, %d for the tenant", adm.Active(), tenant.Runs())
	}
}

// Added, changed and removed files are picked up by Rescan; a changed
// cartridge's old bot is closed only once the lease holding it ends.
func TestRescan(t *testing.T) {
	f := newFixture(t, map[string]string{"a.yml": cart("A")})
	ctx := context.Background()
	l := &catalog.Leases{}
	old, err := f.cat.Bot("a", nil, l)
	if err != nil {
		t.Fatal(err)
	}
	closed := f.cat.Closed("a")

	write(t, f.dir, map[string]string{"b.yml": cart("B"), "a.yml": cart("A2", "# changed")})
	future := time.Now().Add(2 * time.Second)
	os.Chtimes(filepath.Join(f.dir, "a.yml"), future, future) //nolint:errcheck // size changed anyway
	f.cat.Rescan(ctx)
	if got := ids(f.cat.Models(nil, nil)); got != "- a b" {
		t.Fatalf("after adding b: %v", got)
	}
	m, _ := f.cat.Model("a", nil)
	if m.Cartridge.Meta().Name != "A2" || m.Bot == old.Bot {
		t.Fatalf("a was not reloaded: %q", m.Cartridge.Meta().Name)
	}
	if closed() {
		t.Fatal("the old bot was closed while a lease held it")
	}
	l.Release()
	if !closed() {
		t.Fatal("the old bot was not closed when its lease ended")
	}
	if !strings.Contains(f.log.String(), "cartridge reloaded") {
		t.Errorf("no log line for the reload:\n%s", f.log)
	}

	os.Remove(filepath.Join(f.dir, "b.yml"))
	write(t, f.dir, map[string]string{"a.yml": "meta: {name: [\n"})
	f.cat.Rescan(ctx)
	models := f.cat.Models(nil, nil)
	if got := ids(models); got != "- a" {
		t.Fatalf("after removing b: %v", got)
	}
	if models[1].Err == nil {
		t.Fatal("a broken edit is not reported")
	}
	if !strings.Contains(f.log.String(), "cartridge removed") || !strings.Contains(f.log.String(), "cartridge added") {
		t.Errorf("no log line for the removal:\n%s", f.log)
	}
}

// A symbolic link is followed while it stays inside the folder, as
// os.Root does: one to a file outside is listed as broken, saying why,
// and its bot is never built; links to folders are not followed.
func TestSymlinksStayInsideTheFolder(t *testing.T) {
	outside := t.TempDir()
	write(t, outside, map[string]string{"secret.yml": cart("Outside"), "sub/inner.yml": cart("Inner")})
	f := newFixture(t, map[string]string{"real.yml": cart("Real")})
	for link, target := range map[string]string{
		"inside.yml":  filepath.Join(f.dir, "real.yml"),
		"outside.yml": filepath.Join(outside, "secret.yml"),
		"folder":      filepath.Join(outside, "sub"),
	} {
		if err := os.Symlink(target, filepath.Join(f.dir, link)); err != nil {
			t.Skipf("SKIP: symbolic links are not available here: %v", err)
		}
	}
	f.cat.Rescan(context.Background())
	if got := ids(f.cat.Models(nil, nil)); got != "- inside outside real" {
		t.Fatalf("models %q", got)
	}
	if m, err := f.cat.Bot("inside", nil, nil); err != nil || m.Cartridge.Meta().Name != "Real" {
		t.Fatalf("a link inside the folder: %v", err)
	}
	m, err := f.cat.Bot("outside", nil, nil)
	var ce *catalog.Error
	if !errors.As(err, &ce) || ce.Kind != catalog.Broken || m.Cartridge != nil ||
		!strings.Contains(err.Error(), "outside.yml: the symbolic link leads outside the folder") || strings.Contains(err.Error(), outside) {
		t.Fatalf("a link outside the folder: %v", err)
	}
}

// Build is the one sequence from a cartridge to a ready bot: warnings,
// then the bot, then its modes; a cartridge that cannot run fails there.
func TestBuild(t *testing.T) {
	var warned []string
	h := bot.Host{Warn: func(m string) { warned = append(warned, m) }, Environ: []string{"HOME=" + t.TempDir()}}
	c, err := cartridge.Parse([]byte("provider: {id: openai, credentials: {address: 'http://127.0.0.1:1', access-token: k}, settings: {model: m}}\nunknown-key: 1\n"), "c.yml", cartridge.FormatYAML, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := catalog.Build(context.Background(), c, h)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	if len(c.Warnings) == 0 || len(warned) != len(c.Warnings) {
		t.Fatalf("warnings %q, cartridge's %q", warned, c.Warnings)
	}
	c, err = cartridge.Parse([]byte("provider: {id: openai, settings: {model: m}}\n"), "c.yml", cartridge.FormatYAML, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := catalog.Build(context.Background(), c, h); err == nil {
		t.Fatal("a cartridge without credentials was built")
	}
}
