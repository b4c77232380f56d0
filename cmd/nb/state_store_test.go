package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nbots/nb/internal/pgtest"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/state/pgstore"
)

// cluster starts a PostgreSQL cluster for one test (this package's
// TestMain is testscript's), skipping loudly without PostgreSQL and
// failing under CI.
func cluster(t *testing.T) *pgtest.Cluster {
	t.Helper()
	c, err := pgtest.Start(pgtest.Options{})
	if errors.Is(err, pgtest.ErrNotInstalled) && os.Getenv("CI") == "" {
		t.Skipf("!!! SKIPPED: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// runNBInput runs nb in process with env, stdin, and a home of its own,
// and returns the exit code, stdout and stderr.
func runNBInput(t *testing.T, env []string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	return runNBStdin(t, append([]string{"HOME=" + t.TempDir(), "NB_DOTENV=0"}, env...), stdin, args...)
}

// TestStoreURL: nb serve --store keeps its conversations in PostgreSQL
// and fails /ready (saying why, without the password) when the database
// cannot be reached; NB_STORE makes the cartridge commands use it; nb
// state export and import move the conversations to the files and back.
func TestStoreURL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL and nb serve")
	}
	ctx := context.Background()
	pg := cluster(t)
	dbURL, err := pg.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(dbURL)
	db := strings.TrimPrefix(u.Path, "/")
	fake := httptest.NewServer(openaitest.New(func(providertest.Turn) providertest.Reply {
		return providertest.Reply{Chunks: []string{"hello"}}
	}))
	defer fake.Close()
	dir := t.TempDir()
	src := "meta: {author: Tests, name: Stored, version: 1.0.0}\nprovider: {id: openai, credentials: {address: ENV/OPENAI_API_ADDRESS, access-token: k}, settings: {model: m}}\n"
	cart := filepath.Join(dir, "stored.yml")
	if err := os.WriteFile(cart, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"OPENAI_API_ADDRESS=" + fake.URL, "NANO_BOTS_ENCRYPTION_PASSWORD=pw", "NANO_BOTS_STATE_PATH=" + filepath.Join(dir, "unused")}

	_, base, stderr := nbServe(t, dir, env, "--store", dbURL)
	if code, body, err := post(base+"/cartridges", `{"cartridge": "stored", "state": "k1", "input": "hi"}`); err != nil || code != 200 {
		t.Fatalf("eval: %d %s %v", code, body, err)
	}
	store, err := pgstore.Open(ctx, dbURL, pgstore.Options{Cipher: state.NewCipher("pw")})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	bot := state.Bot{Author: "Tests", Name: "Stored", Version: "1.0.0"}
	if l, err := store.List(ctx, bot); err != nil || len(l.Keys) != 1 || l.Keys[0].Key != "k1" || l.Keys[0].Events != 2 {
		t.Fatalf("the database holds %+v, %v", l, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "unused")); err == nil {
		t.Error("nb serve --store wrote state files")
	}
	ready := func() (int, map[string]any) {
		resp, err := http.Get(base + "/ready")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		json.NewDecoder(resp.Body).Decode(&out) //nolint:errcheck // checked by the callers
		return resp.StatusCode, out
	}
	if code, out := ready(); code != 200 || out["ready"] != true {
		t.Errorf("/ready: %d %v", code, out)
	}

	// Cut off: the database refuses connections and drops the open ones.
	if err := pg.Exec(ctx, "ALTER DATABASE "+db+" ALLOW_CONNECTIONS false"); err != nil {
		t.Fatal(err)
	}
	if err := pg.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", db); err != nil {
		t.Fatal(err)
	}
	code, out := ready()
	checks, _ := out["checks"].(map[string]any)
	why, _ := checks["store"].(string)
	if code != 503 || out["ready"] != false || !strings.Contains(why, "PostgreSQL postgres://"+u.Host+"/"+db) || strings.Contains(why, pg.Password()) {
		t.Errorf("/ready cut off from the database: %d %v", code, out)
	}
	if err := pg.Exec(ctx, "ALTER DATABASE "+db+" ALLOW_CONNECTIONS true"); err != nil {
		t.Fatal(err)
	}
	if code, out := ready(); code != 200 {
		t.Errorf("/ready once the database is back: %d %v", code, out)
	}
	if strings.Contains(stderr.String(), pg.Password()) {
		t.Errorf("nb serve logged the password:\n%s", stderr.String())
	}

	// NB_STORE for the cartridge commands.
	code, listed, errs := runNBInput(t, append(env, "NB_STORE="+dbURL), "", cart, "-", "state", "list")
	if code != 0 || !strings.Contains(listed, "k1") {
		t.Fatalf("state list with NB_STORE: %d\n%s\n%s", code, listed, errs)
	}

	// Export from the database, import into the files, and back into a
	// new database.
	code, export, errs := runNBInput(t, env, "", "state", "export", "--store", dbURL)
	if code != 0 || !strings.Contains(errs, "exported 1 conversations (2 events") || strings.Contains(errs, pg.Password()) {
		t.Fatalf("export: %d\n%s", code, errs)
	}
	root := filepath.Join(dir, "files")
	filesEnv := append(env[:len(env)-1:len(env)-1], "NANO_BOTS_STATE_PATH="+root)
	if code, _, errs := runNBInput(t, filesEnv, export, "state", "import"); code != 0 || !strings.Contains(errs, "imported 1 conversations") {
		t.Fatalf("import into the files: %d\n%s", code, errs)
	}
	files := state.Files{Root: root, Cipher: state.NewCipher("pw")}
	l, err := files.List(ctx, bot)
	if err != nil || len(l.Keys) != 1 {
		t.Fatalf("the files hold %+v, %v", l, err)
	}
	c, _ := files.Open(bot, l.Keys[0].EndUser, "k1")
	if history, err := c.History(ctx); err != nil || len(history) != 2 || history[1].Message != "hello" {
		t.Errorf("the imported history: %v, %v", state.JSON(history), err)
	}
	again, _, _ := runNBInput(t, filesEnv, "", "state", "export")
	if again != 0 {
		t.Fatal("export from the files failed")
	}
	other, err := pg.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runNBInput(t, append(env, "NB_STORE="+other), export, "state", "import"); code != 0 || strings.Contains(errs, pg.Password()) {
		t.Fatalf("import into another database: %d\n%s", code, errs)
	}
	if code, _, errs := runNBInput(t, env, "", "state", "import", "--store", "mysql://nb:"+pg.Password()+"@h/db"); code == 0 || strings.Contains(errs, pg.Password()) || !strings.Contains(errs, "unknown kind of store") {
		t.Errorf("a store URL of an unknown kind: %d\n%s", code, errs)
	}
}
