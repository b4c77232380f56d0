package session_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/session"
	"github.com/nbots/nb/gateway/session/sessiontest"
	"github.com/nbots/nb/internal/pgtest"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/state/pgstore"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestConformanceFiles runs the session suite on nanobot's files: two
// managers of one folder are a gateway and nb gateway chat.
func TestConformanceFiles(t *testing.T) {
	sessiontest.Run(t, sessiontest.Harness{New: func(t *testing.T) sessiontest.Replicas {
		dir := t.TempDir()
		var r sessiontest.Replicas
		for _, m := range []**session.Manager{&r.A, &r.B} {
			var err error
			if *m, err = session.NewManager(dir); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { (*m).Close() })
		}
		return r
	}})
}

// testTTL is the leases' TTL here: a dead replica's sessions are taken
// over quickly, renewals still pass on a loaded machine.
const testTTL = 2 * time.Second

// openPG opens a view of the database at url, as a replica does.
func openPG(t testing.TB, url string, cipher *state.Cipher) *pgstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := pgstore.Open(ctx, url, pgstore.Options{LeaseTTL: testTTL, Cipher: cipher})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestConformancePostgreSQL runs the session suite on PostgreSQL: two
// replicas, each with its own connections; killing A closes them, so
// that its leases are no longer renewed and expire.
func TestConformancePostgreSQL(t *testing.T) {
	sessiontest.Run(t, sessiontest.Harness{New: func(t *testing.T) sessiontest.Replicas {
		url := pgtest.New(t)
		a, b := openPG(t, url, state.NewCipher("a password")), openPG(t, url, state.NewCipher("a password"))
		t.Cleanup(b.Close)
		closeA := func() {}
		killed := false
		closeA = func() {
			if !killed {
				killed = true
				a.Close()
			}
		}
		t.Cleanup(closeA)
		var r sessiontest.Replicas
		var err error
		if r.A, err = session.NewStoreManager(a, session.Bot("test")); err != nil {
			t.Fatal(err)
		}
		if r.B, err = session.NewStoreManager(b, session.Bot("test")); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.A.Close(); r.B.Close() })
		r.KillA = closeA
		return r
	}})
}

// TestFilesToPostgreSQLAndBack: a workspace's session files imported
// into PostgreSQL and exported again are the same files, byte for byte
// (a torn last line aside, left out as a load cuts it off); a session
// continued in the store between the two is written back as nanobot's
// lines, its /new as the files' .bak.
func TestFilesToPostgreSQLAndBack(t *testing.T) {
	files := map[string]string{
		"telegram_12345.jsonl": `{"_type": "metadata", "key": "telegram:12345", "created_at": "2026-03-01T10:00:00", "updated_at": "2026-03-15T14:30:00", "metadata": {"lang": "fr"}, "last_consolidated": 1}
{"role": "user", "content": "old question", "timestamp": "2026-03-01T10:00:00.000001"}
{"role": "user", "content": [{"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}], "timestamp": "2026-03-15T14:30:00.123456"}

{"role": "assistant", "content": null, "tool_calls": [{"id": "call_abc", "type": "function", "function": {"name": "web_search", "arguments": "{\"query\": \"été\"}"}}], "timestamp": "2026-03-15T14:30:01.234567"}
{"role": "tool", "content": "Sunny, 22°C", "tool_call_id": "call_abc", "name": "web_search", "timestamp": "2026-03-15T14:30:02.345678"}
{"_type": "metadata", "key": "telegram:12345", "created_at": "2026-03-01T10:00:00", "updated_at": "2026-03-15T14:31:00", "metadata": {"lang": "fr"}, "last_consolidated": 2}
{"role": "assistant", "content": "C'est une image 🌞", "timestamp": "2026-03-15T14:30:03.000000"}
`,
		"cli_direct.jsonl": `{"_type":"metadata","key":"cli:direct","created_at":"2026-03-01T10:00:00.000000","updated_at":"2026-03-01T10:00:00.000000","metadata":{},"last_consolidated":0}` + "\n",
		"web_torn.jsonl":   `{"_type": "metadata", "key": "web:torn", "created_at": "2026-03-01T10:00:00", "updated_at": "2026-03-01T10:00:00", "metadata": {}, "last_consolidated": 0}` + "\n" + `{"role": "user", "content": "cut`,
	}
	src := t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fm, err := session.NewManager(src)
	if err != nil {
		t.Fatal(err)
	}
	defer fm.Close()
	st := openPG(t, pgtest.New(t), state.NewCipher("pw"))
	defer st.Close()
	sm, err := session.NewStoreManager(st, session.Bot("ws1"))
	if err != nil {
		t.Fatal(err)
	}
	var warned []string
	sm.Warn = func(msg string) { warned = append(warned, msg) }
	ctx := context.Background()
	stats, err := sm.ImportFiles(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Sessions != 3 || stats.Lines != 10 || len(warned) != 1 || !strings.Contains(warned[0], "torn") {
		t.Fatalf("import: %+v, warnings %q", stats, warned)
	}
	if again, err := sm.ImportFiles(ctx, src); err != nil || again.Skipped != 3 || again.Sessions != 0 {
		t.Fatalf("a second import: %+v, %v", again, err)
	}
	// The store's session reads as the file's.
	for _, key := range []string{"telegram:12345", "cli:direct"} {
		fs, ss := sessiontest.Get(t, fm, key), sessiontest.Get(t, sm, key)
		if !reflect.DeepEqual(fs.Messages(), ss.Messages()) || !reflect.DeepEqual(fs.Meta(), ss.Meta()) || fs.Size() != ss.Size() {
			t.Fatalf("%s: files %+v %+v (%d bytes)\nstore %+v %+v (%d bytes)", key, fs.Meta(), fs.Messages(), fs.Size(), ss.Meta(), ss.Messages(), ss.Size())
		}
	}
	dst := t.TempDir()
	if stats, err := sm.ExportFiles(ctx, dst); err != nil || stats.Sessions != 3 || stats.Earlier != 0 {
		t.Fatalf("export: %+v, %v", stats, err)
	}
	for name, data := range files {
		got, err := os.ReadFile(filepath.Join(dst, name))
		if err != nil {
			t.Fatal(err)
		}
		if name == "web_torn.jsonl" {
			data = data[:strings.LastIndex(data, "\n")+1]
		}
		if string(got) != data {
			t.Fatalf("%s changed:\n%s\nwant\n%s", name, got, data)
		}
	}
	// Continued in the store, with a /new: the export is what the files
	// would hold.
	s := sessiontest.Get(t, sm, "telegram:12345")
	unlock, err := s.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Clear(t.Context()); err != nil {
		t.Fatal(err)
	}
	in := "fresh"
	if err := s.Append(t.Context(), state.Event{Who: state.RoleUser, Message: in, Input: &in}); err != nil {
		t.Fatal(err)
	}
	unlock()
	dst2 := t.TempDir()
	if stats, err := sm.ExportFiles(ctx, dst2); err != nil || stats.Earlier != 1 {
		t.Fatalf("export: %+v, %v", stats, err)
	}
	bak, _ := filepath.Glob(filepath.Join(dst2, "telegram_12345.jsonl.*.bak"))
	if len(bak) != 1 {
		t.Fatalf("backups %v", bak)
	}
	if old, _ := os.ReadFile(bak[0]); string(old) != files["telegram_12345.jsonl"] {
		t.Fatalf("the session before /new:\n%s", old)
	}
	back, err := session.NewManager(dst2)
	if err != nil {
		t.Fatal(err)
	}
	defer back.Close()
	fresh := sessiontest.Get(t, back, "telegram:12345")
	if h := fresh.History(); len(h) != 1 || h[0].Message != "fresh" || fresh.Meta().Metadata["lang"] != "fr" {
		t.Fatalf("after /new: %+v %+v", h, fresh.Meta())
	}
	if stats, err := sm.ExportFiles(ctx, dst2); err != nil || stats.Skipped != 3 {
		t.Fatalf("an export over the files: %+v, %v", stats, err)
	}
}
