package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/nbots/nb/gateway/channel/telegram/botapi"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/state/pgstore"
)

var storeKills = flag.Int("replica-store-kills", 4, "how many times TestGatewayReplicasKill9PostgreSQL kills a replica")

// sharedStore gives the replicas of rs separate workspaces and state
// folders (as on separate machines) and a new database of a PostgreSQL cluster as their
// store, with a 2 s lease; it returns the database's URL.
func sharedStore(t *testing.T, rs *replicaSet) string {
	t.Helper()
	dbURL, err := cluster(t).NewDatabase(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	rs.args = func(i int) []string { return []string{"--workspace", filepath.Join(root, fmt.Sprint("machine", i))} }
	rs.envFor = func(i int) []string { return []string{"XDG_STATE_HOME=" + filepath.Join(root, fmt.Sprint("state", i))} }
	rs.env = append(rs.env, "NB_STORE="+dbURL, "NB_STORE_LEASE_TTL=2s")
	return dbURL
}

// TestGatewayReplicasSharedSessions: two nb gateway replicas with
// separate workspaces share a PostgreSQL store and the NATS bus; a
// conversation whose turns land on one replica, then the other (the one
// that answered last is stopped), keeps one history: each turn sees
// every message before it. No session file is written in a workspace.
func TestGatewayReplicasSharedSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL, NATS and two nb gateway replicas")
	}
	rs := newReplicaSet(t, func(turn providertest.Turn) providertest.Reply {
		var seen []string
		for _, m := range turn.Messages {
			if m.Role == "user" {
				if i := strings.Index(m.Content, "said-"); i >= 0 {
					seen = append(seen, strings.Fields(m.Content[i:])[0])
				}
			}
		}
		return providertest.Reply{Chunks: []string{"heard " + strings.Join(seen, ",")}}
	}, "")
	dbURL := sharedStore(t, rs)
	u0, _ := url.Parse(dbURL)
	password, _ := u0.User.Password()
	rs.start(0)
	rs.start(1)
	u := botapi.User{ID: 4242, FirstName: "ann"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var want []string
	for i := range 4 {
		text := fmt.Sprintf("said-%d", i)
		want = append(want, text)
		if i > 0 {
			// The replica that did not answer last is stopped: the turn
			// runs on the other. (Not in the millisecond after a reply
			// was sent, before its delivery was recorded: that reply
			// would be sent again, docs/scale-out.md.)
			time.Sleep(500 * time.Millisecond)
			rs.kill9((i + 1) % 2)
			if i > 1 {
				rs.start(i % 2)
			}
		}
		rs.tg.Say(u, text)
		sent, err := rs.tg.WaitSent(ctx, u.ID, i+1)
		if err != nil {
			t.Fatalf("%v\n%s", err, rs.dump())
		}
		if got, w := sent[i].Text, "heard "+strings.Join(want, ","); got != w {
			var all []string
			for _, m := range rs.tg.Sent(u.ID) {
				all = append(all, m.Text)
			}
			t.Fatalf("turn %d answered %q, want %q: the history is not shared (sent %q)\n%s", i, got, w, all, rs.dump())
		}
	}
	for i := range 2 {
		ws := filepath.Join(filepath.Dir(rs.args(i)[1]), fmt.Sprint("machine", i), "sessions")
		if files, _ := filepath.Glob(filepath.Join(ws, "*.jsonl")); len(files) > 0 {
			t.Errorf("replica %d wrote session files: %v", i, files)
		}
	}
	for i, l := range rs.logs {
		if l != nil && !strings.Contains(l.String(), "sessions") {
			t.Errorf("replica %d did not log where its sessions are", i)
		}
	}
	if !strings.Contains(rs.logs[0].String(), "postgres://127.0.0.1:") || password == "" || strings.Contains(rs.logs[0].String(), password) {
		t.Errorf("the log does not name the store without its credentials:\n%s", rs.logs[0].String())
	}
}

// TestGatewayReplicasKill9PostgreSQL is TestGatewayReplicasKill9 with
// the sessions in PostgreSQL and a workspace per replica: a replica
// killed in the middle of a turn holds its session until its lease
// expires (2 s here), then the turn runs again on another; every message
// is answered once, in order.
func TestGatewayReplicasKill9PostgreSQL(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL, NATS and three nb gateway replicas and kills them")
	}
	replicasKill9(t, *storeKills, func(rs *replicaSet) { sharedStore(t, rs) })
}

// TestGatewaySessionsCommands: a nanobot workspace's session imported into
// PostgreSQL (nb gateway sessions import) continues there with nb gateway
// chat and NB_STORE, the workspace's file untouched; exported into
// another workspace it is the file as it was, then the turn's two lines
// as nb writes them; without a store the commands say what is missing.
func TestGatewaySessionsCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	dbURL, err := cluster(t).NewDatabase(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	model := httptest.NewServer(openaitest.New(func(turn providertest.Turn) providertest.Reply {
		var users []string
		for _, m := range turn.Messages {
			if m.Role == "user" {
				users = append(users, m.Content)
			}
		}
		return providertest.Reply{Chunks: []string{fmt.Sprintf("heard %d: %s", len(users), turn.LastUser())}}
	}))
	defer model.Close()
	dir := t.TempDir()
	ws := filepath.Join(dir, "workspace")
	old := `{"_type": "metadata", "key": "cli:direct", "created_at": "2026-03-01T10:00:00", "updated_at": "2026-03-15T14:30:00", "metadata": {}, "last_consolidated": 0}
{"role": "user", "content": "old question", "timestamp": "2026-03-01T10:00:00.000001"}
{"role": "assistant", "content": "old answer", "timestamp": "2026-03-01T10:00:01.000001"}
`
	if err := os.MkdirAll(filepath.Join(ws, "sessions"), 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(ws, "sessions", "cli_direct.jsonl")
	if err := os.WriteFile(file, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "gateway.json")
	data, _ := json.Marshal(map[string]any{
		"agents":    map[string]any{"defaults": map[string]any{"workspace": ws, "model": "gpt-4o-mini", "provider": "custom"}},
		"providers": map[string]any{"custom": map[string]any{"apiBase": model.URL, "apiKey": "test-key"}},
	})
	if err := os.WriteFile(cfg, data, 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"XDG_STATE_HOME=" + filepath.Join(dir, "state"), "NANO_BOTS_ENCRYPTION_PASSWORD=pw"}
	withStore := append(slices.Clone(env), "NB_STORE="+dbURL)

	// Before the import, nb gateway says that the workspace's session
	// is not in the store.
	if code, _, errs := runNBInput(t, withStore, "", "gateway", "chat", "--config", cfg, "-s", "web:other", "-m", "hi"); code != 0 || !strings.Contains(errs, "1 session files that are not in the store") {
		t.Fatalf("no warning of the files left out: %d\n%s", code, errs)
	}
	code, _, errs := runNBInput(t, withStore, "", "gateway", "sessions", "import", "--config", cfg)
	if code != 0 || !strings.Contains(errs, "imported 1 sessions (3 lines)") || !strings.Contains(errs, "conversations of nb/gateway/nb") {
		t.Fatalf("import: %d\n%s", code, errs)
	}
	code, out, errs := runNBInput(t, withStore, "", "gateway", "chat", "--config", cfg, "-m", "and now?")
	if strings.Contains(errs, "not in the store") {
		t.Errorf("a warning after the import:\n%s", errs)
	}
	if code != 0 || !strings.Contains(out, "heard 2: ") || !strings.Contains(out, "and now?") {
		t.Fatalf("chat on the imported session: %d\n%s\n%s", code, out, errs)
	}
	if got, _ := os.ReadFile(file); string(got) != old {
		t.Fatalf("nb gateway chat with NB_STORE wrote the workspace's file:\n%s", got)
	}
	ws2 := filepath.Join(dir, "back")
	code, _, errs = runNBInput(t, env, "", "gateway", "sessions", "export", "--config", cfg, "--workspace", ws2, "--store", dbURL)
	if code != 0 || !strings.Contains(errs, "exported 2 sessions (8 lines, 0 earlier") {
		t.Fatalf("export: %d\n%s", code, errs)
	}
	back, err := os.ReadFile(filepath.Join(ws2, "sessions", "cli_direct.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(strings.TrimPrefix(string(back), old), "\n"), "\n")
	if !strings.HasPrefix(string(back), old) || len(lines) != 2 || !strings.HasPrefix(lines[0], `{"role":"user","content":"and now?"`) || !strings.HasPrefix(lines[1], `{"role":"assistant","content":"heard 2: `) {
		t.Fatalf("exported:\n%s", back)
	}
	// gateway.store names the store too.
	cfg2 := filepath.Join(dir, "gateway2.json")
	data, _ = json.Marshal(map[string]any{
		"agents":  map[string]any{"defaults": map[string]any{"workspace": ws2}},
		"gateway": map[string]any{"store": dbURL},
	})
	if err := os.WriteFile(cfg2, data, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errs = runNBInput(t, env, "", "gateway", "sessions", "export", "--config", cfg2)
	if code != 0 || !strings.Contains(errs, "2 sessions have a file already") {
		t.Fatalf("export over the files: %d\n%s", code, errs)
	}
	code, _, errs = runNBInput(t, env, "", "gateway", "sessions", "export", "--config", cfg)
	if code == 0 || !strings.Contains(errs, "name the PostgreSQL store") {
		t.Fatalf("export without a store: %d\n%s", code, errs)
	}
	code, _, errs = runNBInput(t, append(slices.Clone(withStore), "NB_STORE_LEASE_TTL=5"), "", "gateway", "sessions", "export", "--config", cfg)
	if code == 0 || !strings.Contains(errs, `NB_STORE_LEASE_TTL "5": a duration of a second or more`) {
		t.Fatalf("a lease TTL without its unit: %d\n%s", code, errs)
	}
	code, _, errs = runNBInput(t, env, "", "gateway", "sessions", "--config", cfg)
	if code == 0 || !strings.Contains(errs, "say import") {
		t.Fatalf("no verb: %d\n%s", code, errs)
	}
}

// TestGatewayReplicaCutOffFromStore: of two replicas sharing the
// sessions in PostgreSQL, each with a database role of its own, one is
// cut off from the database (its role may no longer log in, its
// connections are closed): its /ready fails, and every message is
// answered once, by the other, with the history it has (no error reply
// from the one cut off). Back, it is ready again.
func TestGatewayReplicaCutOffFromStore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL, NATS and two nb gateway replicas")
	}
	rs := newReplicaSet(t, func(turn providertest.Turn) providertest.Reply {
		n := 0
		for _, m := range turn.Messages {
			if m.Role == "user" {
				n++
			}
		}
		return providertest.Reply{Chunks: []string{fmt.Sprintf("%d: %s", n, turn.LastUser())}}
	}, "")
	ctx := context.Background()
	pg := cluster(t)
	dbURL, err := pg.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The tables, then a role per replica that may use them.
	st, err := pgstore.Open(ctx, dbURL, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	conn, err := pgx.Connect(ctx, dbURL) // the grants are the database's
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	urls := make([]string, 2)
	for i, role := range []string{"replica_a", "replica_b"} {
		for _, q := range []string{
			"CREATE ROLE " + role + " LOGIN PASSWORD 'pw_" + role + "'",
			"GRANT ALL ON ALL TABLES IN SCHEMA public TO " + role,
			"GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO " + role,
		} {
			if _, err := conn.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		u, _ := url.Parse(dbURL)
		u.User = url.UserPassword(role, "pw_"+role)
		urls[i] = u.String()
	}
	root := t.TempDir()
	rs.args = func(i int) []string { return []string{"--workspace", filepath.Join(root, fmt.Sprint("machine", i))} }
	rs.envFor = func(i int) []string {
		return []string{"NB_STORE=" + urls[i], "NB_STORE_LEASE_TTL=2s", "XDG_STATE_HOME=" + filepath.Join(root, fmt.Sprint("state", i))}
	}
	rs.start(0)
	rs.start(1)
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	users := []botapi.User{{ID: 5100, FirstName: "a"}, {ID: 5101, FirstName: "b"}, {ID: 5102, FirstName: "c"}}
	for _, u := range users {
		rs.tg.Say(u, "first")
		if _, err := rs.tg.WaitSent(wctx, u.ID, 1); err != nil {
			t.Fatalf("%v\n%s", err, rs.dump())
		}
	}
	if err := pg.Exec(ctx, "ALTER ROLE replica_a NOLOGIN"); err != nil {
		t.Fatal(err)
	}
	if err := pg.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = 'replica_a'"); err != nil {
		t.Fatal(err)
	}
	ready := func(i int) int {
		resp, err := http.Get(rs.urls[i] + "/ready")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for deadline := time.Now().Add(20 * time.Second); ready(0) != 503; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the replica cut off from the database is still ready\n%s", rs.dump())
		}
	}
	for round := range 2 {
		for _, u := range users {
			rs.tg.Say(u, fmt.Sprint("again", round))
		}
		for _, u := range users {
			sent, err := rs.tg.WaitSent(wctx, u.ID, 2+round)
			if err != nil {
				t.Fatalf("%v\n%s", err, rs.dump())
			}
			if got, want := sent[1+round].Text, fmt.Sprintf("%d: again%d", 2+round, round); !strings.Contains(got, want[:2]) || !strings.HasSuffix(got, fmt.Sprint("again", round)) {
				t.Fatalf("chat %d answered %q, want %q (every message before it in the history)\n%s", u.ID, got, want, rs.dump())
			}
		}
	}
	time.Sleep(time.Second) // an error reply or a second answer would come now
	for _, u := range users {
		if sent := rs.tg.Sent(u.ID); len(sent) != 3 {
			var texts []string
			for _, m := range sent {
				texts = append(texts, m.Text)
			}
			t.Fatalf("chat %d was sent %q, want three answers\n%s", u.ID, texts, rs.dump())
		}
	}
	if err := pg.Exec(ctx, "ALTER ROLE replica_a LOGIN"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ready(0) != 200; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the replica is not ready again once the database is back\n%s", rs.dump())
		}
	}
}
