package state

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestSlugVectors(t *testing.T) {
	for in, want := range map[string]string{
		"None": "none", "Unknown": "unknown", "0-0-0": "0-0-0", "1-0-0": "1-0-0", "Nano Bot Name": "nano-bot-name",
		"ChatGPT 4o": "chatgpt-4o", "Spells and Potions": "spells-and-potions", "Pokédex": "pokedex", "Ice Baker": "ice-baker",
		" A--B  c ": "a-b-c", "snake_case": "snake_case", "What Time Is It": "what-time-is-it", "get_current_weather": "get_current_weather",
		"Straße Æon": "strasse-aeon", "Ünïcödé Ñame": "unicode-name", "🤖 Bot": "bot", "a.b": "ab", "x/y": "xy", "semi;colon": "semicolon",
		"tab\there": "tabhere", "日本語 ボット": "日本語-ボット", "Привет мир": "привет-мир",
	} {
		if got := Slug(in); got != want {
			t.Errorf("Slug(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCryptoVectors(t *testing.T) {
	for _, v := range []struct{ password, plain, soft string }{
		{"", "your-name", "_O7OjYUESagb46YSeUeSfSMzoO1Yg0BZqpsAkPg4j62SeNYlgwq3kn51Ob2wmIehoA=="},
		{"UNSAFE", "custom-user-a", "_O7OjYUESagb46YSeUeSfSMzoO1Yg0BZJgIXHCBHyADW-rn4IQr-s2RvP7vym8u5tnzYMIs="},
		{"UNSAFE", "custom-user-b", "_O7OjYUESagb46YSeUeSfSMzoO1Yg0BZkjUwCcsh9sVppKvYMhd2qGRvP7vym8u5tnzYMIg="},
		{"UNSAFE", "unknown", "_O7OjYUESagb46YSeUeSfSMzoO1Yg0BZrHx90k5x3_d3pvhFLz-DhnJ0J6HygYg="},
		{"UNSAFE", "E15D", "_O7OjYUESagb46YSeUeSfSMzoO1Yg0BZTu5BsFvd1pEbPF-yuD-c4kIreYs="},
		{"UNSAFE", "ABC", "_O7OjYUESagb46YSeUeSfSMzoO1Yg0BZcG0Vgg4wy9jmO2H03iOQqUZYDw=="},
		{"UNSAFE", `{"key":"ABC","history":[]}`, "_O7OjYUESagb46YSeUeSfSMzoO1Yg0BZXXkZ40Qf1CkAQZMdBwj9Hnw4J6rk1NzuhFvpP8Z3_UXzUr9DYnA7MBrR"},
		{"my-password", "ABC", "b6IojDYb7M4-MLpMQb59i6AeNYBWb3rMhJgsOoH54FkLipo_gsWyMsfPCQ=="},
		{"my-password", "unknown", "b6IojDYb7M4-MLpMQb59i6AeNYBWb3rMgp9JmFA43GZRzNCYHGatm_PjIRJb58g="},
	} {
		c := NewCipher(v.password)
		if got := c.Soft(v.plain); got != v.soft {
			t.Errorf("Soft(%q, %q) = %q, want %q", v.password, v.plain, got, v.soft)
		}
		back, err := c.Decrypt(v.soft)
		if err != nil || string(back) != v.plain {
			t.Errorf("Decrypt: %q %v", back, err)
		}
	}
	c := NewCipher("")
	for enc, want := range map[string]string{"o27D6j9wNnJuvJuy1Qva-nLbwj6p4Y6_5Shw-jt0Zq7K6TDVMtGLYyTI53U=": "SAFE", "j6zQewMGA_dSGLDdk5fyl5iyUdmcGSj1c7Bg4iSUQSAC5EBlBY928w==": ""} {
		got, err := c.Decrypt(enc)
		if err != nil || string(got) != want {
			t.Errorf("Decrypt(%q) = %q, %v", enc, got, err)
		}
	}
	if !c.Check() {
		t.Error("Check failed")
	}
	if _, err := NewCipher("other").Decrypt("o27D6j9wNnJuvJuy1Qva-nLbwj6p4Y6_5Shw-jt0Zq7K6TDVMtGLYyTI53U="); err == nil {
		t.Error("decrypted with the wrong password")
	}
}

func TestPaths(t *testing.T) {
	env := Env{Home: "/home/user"}
	if got := RootFrom("", "", env); got != "/home/user/.local/state/nano-bots" {
		t.Errorf("default root %q", got)
	}
	env.StateHome = "/xdg/state"
	if got := RootFrom("", "", env); got != "/xdg/state/nano-bots" {
		t.Errorf("XDG root %q", got)
	}
	env.StatePath = "/env/path/"
	if got := RootFrom("", "", env); got != "/env/path" {
		t.Errorf("env root %q", got)
	}
	if got := RootFrom("~/cart", "", env); got != "/home/user/cart" {
		t.Errorf("cartridge root %q", got)
	}
	// The file system's root stays the root, not "" (the working directory).
	for _, root := range []string{"/", "//"} {
		if got := RootFrom(root, "", env); got != "/" {
			t.Errorf("root %q gives %q", root, got)
		}
	}
	p := Files{Root: "/home/user/.local/state/nano-bots"}
	st, err := p.Open(Bot{Author: "Author Name", Name: "Nano Bot Name", Version: "0.0.1"}, "end-user-name", "E15D")
	if err != nil {
		t.Fatal(err)
	}
	if want := "/home/user/.local/state/nano-bots/go-nano-bots/author-name/nano-bot-name/0-0-1/end-user-name/E15D/state.json"; st.HistoryLocation() != want {
		t.Errorf("plain path\n got %s\nwant %s", st.HistoryLocation(), want)
	}
	p.Cipher = NewCipher("")
	st, _ = p.Open(Bot{Author: "None", Name: "Unknown", Version: "0.0.0"}, "unknown", "E15D")
	if want := "/home/user/.local/state/nano-bots/go-nano-bots/none/unknown/0-0-0/_O7OjYUESagb46YSeUeSfSMzoO1Yg0BZrHx90k5x3_d3pvhFLz-DhnJ0J6HygYg=/_O7OjYUESagb46YSeUeSfSMzoO1Yg0BZTu5BsFvd1pEbPF-yuD-c4kIreYs=/state.json"; st.HistoryLocation() != want {
		t.Errorf("encrypted path\n got %s\nwant %s", st.HistoryLocation(), want)
	}
	if _, err := p.Open(Bot{Name: "x"}, "u", "k"); err == nil {
		t.Error("no author accepted")
	}
	for _, key := range []string{"../../etc", ".", "..", "a/b", "ünï"} {
		c := Files{}.Component(key)
		if c == "." || c == ".." || filepath.Base(c) != c {
			t.Errorf("unsafe component %q for %q", c, key)
		}
		if back, _ := (Files{}).Uncomponent(c); back != key {
			t.Errorf("round trip %q -> %q -> %q", key, c, back)
		}
	}
}

func TestAppendConcurrent(t *testing.T) {
	for _, cipher := range []*Cipher{nil, NewCipher("pw")} {
		p := Files{Root: t.TempDir(), Cipher: cipher}
		bot := Bot{Author: "a", Name: "b", Version: "1"}
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				st, _ := p.Open(bot, "u", "K")
				if err := Append(context.Background(), st, Event{Who: "user", Message: fmt.Sprint(i)}, Event{Who: "AI", Message: fmt.Sprint(i)}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		st, _ := p.Open(bot, "u", "K")
		history, err := st.History(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(history) != 40 {
			t.Fatalf("%d events, want 40", len(history))
		}
		data, _ := os.ReadFile(st.HistoryLocation())
		if (cipher != nil) == (data[0] == '{') {
			t.Errorf("encryption %v but file starts %q", cipher != nil, data[:1])
		}
		list, err := p.List(context.Background(), bot)
		keys := list.Keys
		if err != nil || len(keys) != 1 || keys[0].Key != "K" || keys[0].EndUser != "u" || keys[0].Events != 40 || list.Unreadable != 0 {
			t.Fatalf("list %+v %v", list, err)
		}
		if existed, err := st.Delete(context.Background()); err != nil || !existed {
			t.Fatal(existed, err)
		}
		if list, _ := p.List(context.Background(), bot); len(list.Keys) != 0 {
			t.Fatalf("after delete: %+v", list)
		}
	}
}

func TestEncryptedNeedsPassword(t *testing.T) {
	p := Files{Root: t.TempDir(), Cipher: NewCipher("pw")}
	st, _ := p.Open(Bot{Author: "a", Name: "b"}, "u", "K")
	Append(context.Background(), st, Event{Who: "user", Message: "x"})
	plain := &fileConversation{dir: st.Location(), key: "K"}
	if _, err := plain.History(context.Background()); err == nil {
		t.Fatal("read an encrypted state without a password")
	}
	wrong := &fileConversation{dir: st.Location(), key: "K", cipher: NewCipher("nope")}
	if _, err := wrong.History(context.Background()); err == nil {
		t.Fatal("read with the wrong password")
	}
}

// TestTurnHoldsTheKey: one exchange on a key at a time. A second Begin
// waits (after saying so) until the first turn ends, or gets ErrBusy when
// it does not want to wait, so the events of two exchanges never
// interleave.
func TestTurnHoldsTheKey(t *testing.T) {
	p := Files{Root: t.TempDir()}
	bot := Bot{Author: "a", Name: "b"}
	st, _ := p.Open(bot, "u", "K")
	first, err := st.Begin(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Begin(context.Background(), nil); err != ErrBusy {
		t.Fatalf("second Begin without waiting: %v, want ErrBusy", err)
	}
	busy := make(chan struct{}, 1)
	done := make(chan []Event, 1)
	go func() {
		defer close(done)
		second, err := st.Begin(context.Background(), func() { busy <- struct{}{} })
		if err != nil {
			t.Error(err)
			return
		}
		second.Append(Event{Who: "user", Message: "second"}) //nolint:errcheck // checked below
		history := second.History()
		second.End()
		done <- history
	}()
	<-busy
	first.Append(Event{Who: "user", Message: "first"}, Event{Who: "AI", Message: "answer"}) //nolint:errcheck // checked below
	first.End()
	history := <-done
	var got []string
	for _, e := range history {
		got = append(got, e.Message.(string))
	}
	if strings.Join(got, ",") != "first,answer,second" {
		t.Errorf("history = %v: the second turn did not see the first's events", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	held, err := st.Begin(context.Background(), nil)
	if err != nil {
		t.Fatalf("the key is still held after both turns ended: %v", err)
	}
	defer held.End()
	if _, err := st.Begin(ctx, func() {}); err != context.DeadlineExceeded {
		t.Errorf("waiting Begin with an expired context: %v", err)
	}
}

// TestStaleTempsRemovedAndDeleteIsComplete: temporary files left by a
// killed writer are removed by the next turn; delete removes everything
// of the key (the state, its lock, any other file), and deleting again
// is not an error.
func TestStaleTempsRemovedAndDeleteIsComplete(t *testing.T) {
	p := Files{Root: t.TempDir()}
	st, _ := p.Open(Bot{Author: "a", Name: "b"}, "u", "K")
	if err := Append(context.Background(), st, Event{Who: "user", Message: "x"}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := os.WriteFile(filepath.Join(st.Location(), fmt.Sprintf(".state-%d.tmp", i)), make([]byte, 1024), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := Append(context.Background(), st, Event{Who: "AI", Message: "y"}); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(st.Location())
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("stale temporary file %s left", e.Name())
		}
	}
	os.WriteFile(filepath.Join(st.Location(), "tool-output.txt"), []byte("big"), 0o600) //nolint:errcheck // checked by Delete
	if existed, err := st.Delete(context.Background()); err != nil || !existed {
		t.Fatalf("Delete = %v, %v", existed, err)
	}
	if _, err := os.Stat(st.Location()); !os.IsNotExist(err) {
		t.Errorf("the key's folder is still there: %v", err)
	}
	if existed, err := st.Delete(context.Background()); err != nil || existed {
		t.Errorf("second Delete = %v, %v; want false, nil", existed, err)
	}
}

// TestListCountsUnreadable: states written with another password (or
// encrypted while no password is set) are counted, not silently hidden.
func TestListCountsUnreadable(t *testing.T) {
	root := t.TempDir()
	bot := Bot{Author: "a", Name: "b"}
	for i, pw := range []string{"one", "one", "two"} {
		st, _ := (Files{Root: root, Cipher: NewCipher(pw)}).Open(bot, "u", fmt.Sprint("K", i))
		if err := Append(context.Background(), st, Event{Who: "user", Message: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := (Files{Root: root, Cipher: NewCipher("two")}).List(context.Background(), bot)
	if err != nil || len(list.Keys) != 1 || list.Unreadable != 2 {
		t.Errorf("with password two: %+v, %v; want 1 key and 2 unreadable", list, err)
	}
	list, err = (Files{Root: root}).List(context.Background(), bot)
	if err != nil || len(list.Keys) != 0 || list.Unreadable != 3 {
		t.Errorf("without a password: %+v, %v; want 3 unreadable", list, err)
	}
}

// TestDeleteRacesBegin: exchanges that wait for a key while it is
// deleted find it either as it was (and the deletion follows them) or
// empty, never bring a deleted conversation back; and the deletion does
// not fail because an exchange began on the key meanwhile.
func TestDeleteRacesBegin(t *testing.T) {
	p := Files{Root: t.TempDir()}
	bot := Bot{Author: "a", Name: "b"}
	for i := range 20 {
		st, _ := p.Open(bot, "u", fmt.Sprint("K", i))
		if err := Append(context.Background(), st, Event{Who: "user", Message: "old"}); err != nil {
			t.Fatal(err)
		}
		// Files to remove make the deletion take a while.
		for j := range 200 {
			if err := os.WriteFile(filepath.Join(st.Location(), fmt.Sprintf("f%d", j)), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		hold, err := st.Begin(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var deleteErr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, deleteErr = st.Delete(context.Background())
		}()
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(w) * 3 * time.Millisecond) // waiters polling out of step
				turn, err := st.Begin(context.Background(), func() {})
				if err != nil {
					t.Error(err)
					return
				}
				defer turn.End()
				if err := turn.Append(Event{Who: "user", Message: "new"}); err != nil {
					t.Error(err)
				}
			}()
		}
		time.Sleep(30 * time.Millisecond) // all wait for the key
		hold.End()
		wg.Wait()
		if deleteErr != nil {
			t.Fatalf("round %d: Delete: %v", i, deleteErr)
		}
		history, err := st.History(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range history {
			if e.Message == "old" {
				t.Fatalf("round %d: the deleted conversation came back: %v", i, history)
			}
		}
	}
}
