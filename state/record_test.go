package state

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbots/nb/media"
)

func strp(s string) *string { return &s }

// goldenEvents are the events of testdata/golden/nb.json, built as nb's
// writers build them (the agent's calls and results, the OpenAI server's
// client calls).
func goldenEvents() []Event {
	at := "2026-11-26T03:50:00Z"
	return []Event{
		{At: at, Who: RoleUser, Mode: "eval", Input: strp(`<hi> & "there" é`), Message: "> <hi> & \"there\" é\n", Images: []media.Image{{MediaType: "image/png", Data: []byte{0x89, 'P', 'N', 'G'}}, {URL: "https://example.com/a.png"}}},
		{At: at, Who: RoleAI, Mode: "eval", Message: nil, Output: strp(""), Reasoning: "think <first>", Extra: map[string]any{"signature": "sig", "n": 1.5},
			ToolCalls: []ToolCall{{ID: "call_1", Name: "weather", Arguments: `{"city":"Zürich"}`}, {ID: "", Name: "noid", Arguments: "{}"}}},
		{At: at, Who: RoleTool, Mode: "eval", Message: "sunny & <warm>", Result: ToolResult{ID: "call_1", Name: "weather"}},
		{At: at, Who: RoleTool, Mode: "eval", Message: "failed", Result: ToolResult{ID: "", Name: "noid", IsError: true}},
		{At: at, Who: RoleTool, Mode: "eval", Message: map[string]any{"a": []any{1.0, "b", nil, true}}, Images: []media.Image{{MediaType: "image/jpeg", Data: []byte("jpg")}}, Result: ToolResult{ID: "c3", Name: "img"}},
		{At: at, Who: RoleAI, Mode: "eval", Message: "Half", Partial: true},
		{At: at, Who: RoleAI, Mode: "eval", Message: "It is sunny.", Output: strp("It is sunny.\n")},
		{At: at, Who: RoleAI, Mode: "eval", ToolCalls: []ToolCall{{ID: "x1", Name: "client_tool", Arguments: "{}"}}, Reasoning: "r"},
	}
}

func goldenFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "golden", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func written(t *testing.T, c Conversation) []byte {
	t.Helper()
	b, err := os.ReadFile(c.HistoryLocation())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestGoldenFiles: the state files written from typed events are, byte
// for byte, those the untyped events (a meta map) gave before the record
// was typed (testdata/golden, written by that code): plain, encrypted
// (the plain text under the encryption), and a file the reference wrote,
// read and appended to.
func TestGoldenFiles(t *testing.T) {
	ctx := context.Background()
	bot := Bot{Author: "a", Name: "b"}
	plain := Files{Root: t.TempDir()}
	c, _ := plain.Open(bot, "u", "K/é")
	if err := Append(ctx, c, goldenEvents()...); err != nil {
		t.Fatal(err)
	}
	want := goldenFile(t, "nb.json")
	if got := written(t, c); !bytes.Equal(got, want) {
		t.Errorf("plain state file differs from the golden one:\n got %s\nwant %s", got, want)
	}

	cipher := NewCipher("pw")
	enc := Files{Root: t.TempDir(), Cipher: cipher}
	c, _ = enc.Open(bot, "u", "K/é")
	if err := Append(ctx, c, goldenEvents()...); err != nil {
		t.Fatal(err)
	}
	got, err := cipher.Decrypt(string(written(t, c)))
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("encrypted state file's plain text differs from the golden one (%v):\n got %s\nwant %s", err, got, want)
	}
	// The golden encrypted file (written before) reads as the events.
	old := &fileConversation{dir: t.TempDir(), key: "K/é", cipher: cipher}
	if err := os.WriteFile(old.file(), goldenFile(t, "nb.enc"), 0o600); err != nil {
		t.Fatal(err)
	}
	events, err := old.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(stripRead(events), stripRead(goldenEvents())) {
		t.Errorf("golden encrypted file read as\n%#v\nwant\n%#v", events, goldenEvents())
	}

	ref := &fileConversation{dir: t.TempDir(), key: "ABC"}
	if err := os.WriteFile(ref.file(), goldenFile(t, "reference.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Append(ctx, ref, Event{At: "2026-11-26T03:50:00Z", Who: RoleAI, Mode: "eval", Message: "ok", Output: strp("ok")}); err != nil {
		t.Fatal(err)
	}
	if got, want := written(t, ref), goldenFile(t, "reference-appended.json"); !bytes.Equal(got, want) {
		t.Errorf("a reference file appended to differs from the golden one:\n got %s\nwant %s", got, want)
	}
}

func stripRead(events []Event) []Event {
	out := make([]Event, len(events))
	for i, e := range events {
		e.read = nil
		out[i] = e
	}
	return out
}

// TestRecordReadsTheReference: the typed fields read from the meta keys
// as nb's readers read them (a value of another type reads as zero), the
// keys nb does not know stay in Meta, and an event read, changed and
// written writes the change as nb writes it.
func TestRecordReadsTheReference(t *testing.T) {
	ref := &fileConversation{dir: t.TempDir(), key: "ABC"}
	if err := os.WriteFile(ref.file(), goldenFile(t, "reference.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	events, err := ref.History(context.Background())
	if err != nil || len(events) != 6 {
		t.Fatalf("%d events, %v", len(events), err)
	}
	if c := events[1].ToolCalls; len(c) != 1 || c[0].ID != "call_Ab" || c[0].Name != "" || c[0].Arguments != "{}" {
		t.Errorf("raw OpenAI call read as %+v", c)
	}
	if r := events[2].Result; r.ID != "call_Ab" || r.Name != "get-weather" || r.IsError || events[2].Who != RoleTool {
		t.Errorf("result read as %+v", r)
	}
	if r := events[4].Result; r.ID != "" || r.Name != "now" || r.IsError {
		t.Errorf("result with id null and is_error \"no\" read as %+v", r)
	}
	if !reflect.DeepEqual(events[3].Meta, map[string]any{"other": []any{1.0, 2.0}}) {
		t.Errorf("unknown meta keys: %v", events[3].Meta)
	}
	ev := events[4]
	ev.Result.ID, ev.Result.IsError = "new", true
	meta := ev.JSON().Meta
	if meta["id"] != "new" || meta["is_error"] != true || meta["name"] != "now" || meta["reasoning"] != "" {
		t.Errorf("changed result written as %v", meta)
	}
	ev = events[1]
	ev.ToolCalls = nil
	if meta := ev.JSON().Meta; meta != nil {
		t.Errorf("calls taken away, meta %v", meta)
	}
}

// TestNowFormatsOncePerSecond checks that Now formats a second once: the
// events of an exchange are stamped within the same second.
func TestNowFormatsOncePerSecond(t *testing.T) {
	Now()
	// At most one second boundary falls within the runs: two allocations
	// in 1,000 runs average to 0.
	if n := testing.AllocsPerRun(1000, func() { Now() }); n != 0 {
		t.Fatalf("Now allocates %v times a call, want 0 within a second", n)
	}
}

// TestNowFollowsTheClock checks that the kept stamp is not given for
// another second: in a bubble the clock starts at 2000-01-01 UTC
// and moves only when the bubble sleeps.
func TestNowFollowsTheClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		want := time.Now().Format(time.RFC3339)
		if got := Now(); got != want {
			t.Fatalf("Now() = %s, want %s", got, want)
		}
		time.Sleep(time.Second)
		want = time.Now().Format(time.RFC3339)
		if got := Now(); got != want {
			t.Fatalf("a second later, Now() = %s, want %s", got, want)
		}
	})
}
