package transfer_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/internal/pgtest"
	"github.com/nbots/nb/media"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/state/pgstore"
	"github.com/nbots/nb/state/transfer"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func strp(s string) *string { return &s }

// fill stores conversations of every shape in s: every kind of event,
// odd keys, a bot without a version, kept outputs (one not UTF-8).
func fill(t *testing.T, s state.Store) {
	t.Helper()
	ctx := context.Background()
	at := "2026-01-02T03:04:05Z"
	events := []state.Event{
		{At: at, Who: state.RoleUser, Mode: "eval", Input: strp("<what> & é"), Message: "> <what> & é", Images: []media.Image{{MediaType: "image/png", Data: []byte{0x89, 'P', 0}}}},
		{At: at, Who: state.RoleAI, Mode: "eval", Output: strp(""), Reasoning: "hmm", Extra: map[string]any{"signature": "s", "n": 1.5},
			ToolCalls: []state.ToolCall{{ID: "call_1", Name: "weather", Arguments: `{"city":"Zürich"}`}}},
		{At: at, Who: state.RoleTool, Mode: "eval", Message: map[string]any{"z": 1.0, "a": []any{"x", nil}}, Result: state.ToolResult{ID: "call_1", Name: "weather", IsError: true}},
		{At: at, Who: state.RoleAI, Mode: "repl", Message: "Half", Partial: true},
	}
	bots := []state.Bot{{Author: "Ann Author", Name: "Bot Ü", Version: "1.2.3"}, {Author: "ann", Name: "other"}}
	for _, b := range bots {
		for _, key := range []string{"k", "a/b", "k\x00", "ü ñ"} {
			c, err := s.Open(b, "user one", key)
			if err != nil {
				t.Fatal(err)
			}
			turn, err := c.Begin(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := turn.Append(events[:2]...); err != nil {
				t.Fatal(err)
			}
			if err := turn.Append(events[2:]...); err != nil {
				t.Fatal(err)
			}
			if _, err := turn.KeepOutput("call_1", strings.Repeat("whole output\n", 1000)); err != nil {
				t.Fatal(err)
			}
			if _, err := turn.KeepOutput("bin", "\xff\xfe not utf-8"); err != nil {
				t.Fatal(err)
			}
			turn.End()
		}
	}
}

// stateFiles reads every state file and kept output under root, by
// path relative to root, decrypted with cipher (the encryption itself
// differs every time: its nonce is random).
func stateFiles(t *testing.T, root string, cipher *state.Cipher) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || strings.HasSuffix(p, ".lock") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if cipher != nil && filepath.Base(p) == state.FileName {
			if b, err = cipher.Decrypt(string(b)); err != nil {
				return err
			}
		}
		rel, _ := filepath.Rel(root, p)
		out[rel] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRoundTrip: files → PostgreSQL → files gives the same state files,
// byte for byte (decrypted), with and without a password; the stream of
// the database is the stream of the files.
func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, password := range []string{"", "secret"} {
		t.Run("password="+password, func(t *testing.T) {
			var cipher *state.Cipher
			if password != "" {
				cipher = state.NewCipher(password)
			}
			from := state.Files{Root: t.TempDir(), Cipher: cipher}
			fill(t, from)
			var first bytes.Buffer
			st, err := transfer.Export(ctx, from, cipher, &first)
			if err != nil {
				t.Fatal(err)
			}
			if st.Conversations != 8 || st.Events != 32 || st.Outputs != 16 || st.Unreadable != 0 {
				t.Fatalf("exported %+v", st)
			}
			if password != "" && (strings.Contains(first.String(), "whole output") || strings.Contains(first.String(), "Zürich")) {
				t.Error("an encrypted export shows the conversations")
			}

			pg, err := pgstore.Open(ctx, pgtest.New(t), pgstore.Options{Cipher: cipher})
			if err != nil {
				t.Fatal(err)
			}
			defer pg.Close()
			if st, err := transfer.Import(ctx, pg, cipher, bytes.NewReader(first.Bytes())); err != nil || st.Conversations != 8 || st.Events != 32 || st.Outputs != 16 {
				t.Fatalf("import into PostgreSQL: %+v, %v", st, err)
			}
			var second bytes.Buffer
			if _, err := transfer.Export(ctx, pg, cipher, &second); err != nil {
				t.Fatal(err)
			}
			a, b := streamLines(t, first.String(), cipher), streamLines(t, second.String(), cipher)
			if strings.Join(a, "\n") != strings.Join(b, "\n") {
				t.Errorf("the database's export differs from the files':\n%s\n----\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
			}

			// The times of last activity came along (to the microsecond,
			// PostgreSQL's precision).
			bot := state.Bot{Author: "Ann Author", Name: "Bot Ü", Version: "1.2.3"}
			lf, _ := from.List(ctx, bot)
			lp, _ := pg.List(ctx, bot)
			if len(lf.Keys) != 4 || len(lp.Keys) != 4 {
				t.Fatalf("listed %d and %d", len(lf.Keys), len(lp.Keys))
			}
			for i := range lf.Keys {
				if lf.Keys[i].Key != lp.Keys[i].Key || !lf.Keys[i].LastActivity.Truncate(time.Microsecond).Equal(lp.Keys[i].LastActivity) {
					t.Errorf("key %d: %q at %v in the files, %q at %v in the database", i, lf.Keys[i].Key, lf.Keys[i].LastActivity, lp.Keys[i].Key, lp.Keys[i].LastActivity)
				}
			}
			to := state.Files{Root: t.TempDir(), Cipher: cipher}
			if st, err := transfer.Import(ctx, to, cipher, bytes.NewReader(second.Bytes())); err != nil || st.Conversations != 8 {
				t.Fatalf("import into files: %+v, %v", st, err)
			}
			want, got := stateFiles(t, from.Root, cipher), stateFiles(t, to.Root, cipher)
			if len(want) != 24 {
				t.Fatalf("%d files written", len(want))
			}
			for p, w := range want {
				if got[p] != w {
					t.Errorf("%s differs after the round trip:\n%q\nwant\n%q", p, got[p], w)
				}
			}
			if len(got) != len(want) {
				t.Errorf("%d files after the round trip, want %d", len(got), len(want))
			}

			// Importing again changes nothing: every conversation is there.
			if st, err := transfer.Import(ctx, pg, cipher, bytes.NewReader(first.Bytes())); err != nil || st.Skipped != 8 || st.Conversations != 0 {
				t.Errorf("import again: %+v, %v", st, err)
			}
		})
	}
}

// streamLines are a stream's lines, decrypted, without the last
// activity (the import's time).
func streamLines(t *testing.T, s string, cipher *state.Cipher) []string {
	var out []string
	for i, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if i > 0 && cipher != nil {
			b, err := cipher.Decrypt(line)
			if err != nil {
				t.Fatal(err)
			}
			line = string(b)
		}
		if i := strings.Index(line, `"last_activity":"`); i >= 0 {
			j := strings.Index(line[i+17:], `"`)
			line = line[:i] + line[i+17+j+1:]
		}
		out = append(out, line)
	}
	return out
}

// TestImportErrors: a stream that is not an export, an encrypted one
// without its password, a damaged line: clear errors naming the line.
func TestImportErrors(t *testing.T) {
	ctx := context.Background()
	s := state.Files{Root: t.TempDir()}
	var enc bytes.Buffer
	filled := state.Files{Root: t.TempDir(), Cipher: state.NewCipher("pw")}
	fill(t, filled)
	if _, err := transfer.Export(ctx, filled, filled.Cipher, &enc); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, want string }{
		{"", "the export is empty"},
		{"{}\n", "line 1: not the header"},
		{`{"nb_state_export":9}` + "\n", "format 9 is newer"},
		{enc.String(), "set NANO_BOTS_ENCRYPTION_PASSWORD"},
		{`{"nb_state_export":1}` + "\n" + `{"bot":"a/b/c","key":{"x":1}}` + "\n", "line 2: "},
		{`{"nb_state_export":1}` + "\n" + `{"bot":"nope","end_user":"u","key":"k","history":[]}` + "\n", `line 2: "nope" is not a bot's author/name/version`},
	} {
		if _, err := transfer.Import(ctx, s, nil, strings.NewReader(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Import(%.40q) = %v, want %q", tc.in, err, tc.want)
		}
	}
}
