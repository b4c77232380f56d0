// Package storetest is the conformance suite of conversation stores:
// every state.Store (the files, a database shared by machines) runs Run
// from its tests and passes it.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/media"
	"github.com/nbots/nb/state"
)

// Harness makes the stores the suite tests.
type Harness struct {
	// New makes a new, empty storage and returns how to open it: each
	// call of open is a view of the same conversations as another
	// process or machine sees them, encrypting with password ("" for
	// none).
	New func(t *testing.T) (open func(password string) state.Store)
	// Crash makes the process holding turn die in the middle of
	// appending events, after what it appended before was stored: the
	// store must then hold the history with all of events or none of
	// them, and let another exchange begin on the conversation (at once,
	// or once the dead holder's lease expired).
	Crash func(t *testing.T, turn state.Turn, events []state.Event)
	// Expire makes turn's hold on its conversation expire as if its
	// holder stopped renewing it (a lease). Nil for stores whose hold
	// lasts as long as its process (a file lock): the takeover test is
	// then skipped.
	Expire func(t *testing.T, turn state.Turn)
	// Many is the number of conversations of the listing test; 0 means
	// 10,000.
	Many int
}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(*testing.T, Harness)
	}{
		{"RoundTrip", testRoundTrip},
		{"Isolation", testIsolation},
		{"Busy", testBusy},
		{"ConcurrentExchanges", testConcurrentExchanges},
		{"CrashBetweenAppendAndCommit", testCrash},
		{"DeleteWhileLocked", testDeleteWhileLocked},
		{"ListUnreadable", testListUnreadable},
		{"ManyConversations", testMany},
		{"LargeOutputs", testLargeOutputs},
		{"LeaseTakeover", testLeaseTakeover},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, h) })
	}
}

var bot = state.Bot{Author: "Store Test", Name: "Conformance", Version: "1.0.0"}

// timeout bounds every wait of the suite, so that a store that hangs
// fails instead of stalling the run.
const timeout = 30 * time.Second

func ctxOf(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}

func open(t *testing.T, s state.Store, endUser, key string) state.Conversation {
	t.Helper()
	c, err := s.Open(bot, endUser, key)
	if err != nil {
		t.Fatalf("Open(%q, %q): %v", endUser, key, err)
	}
	return c
}

func strp(s string) *string { return &s }

// sample is a conversation with every kind of event and field.
func sample() []state.Event {
	at := "2026-01-02T03:04:05Z"
	return []state.Event{
		{At: at, Who: state.RoleUser, Mode: "eval", Input: strp("<what> & é"), Message: "> <what> & é", Images: []media.Image{{MediaType: "image/png", Data: []byte{0x89, 'P', 'N', 'G', 0}}, {URL: "https://example.com/a.png"}}},
		{At: at, Who: state.RoleAI, Mode: "eval", Output: strp(""), Reasoning: "first <think>", Extra: map[string]any{"signature": "s", "n": 1.5, "list": []any{"a", true, nil}},
			ToolCalls: []state.ToolCall{{ID: "call_1", Name: "weather", Arguments: `{"city":"Zürich"}`}, {ID: "", Name: "noid", Arguments: "{}"}}},
		{At: at, Who: state.RoleTool, Mode: "eval", Message: "sunny", Result: state.ToolResult{ID: "call_1", Name: "weather"}},
		{At: at, Who: state.RoleTool, Mode: "eval", Message: map[string]any{"error": []any{1.0, "x"}}, Images: []media.Image{{MediaType: "image/jpeg", Data: []byte("jpg")}}, Result: state.ToolResult{Name: "noid", IsError: true}},
		{At: at, Who: state.RoleAI, Mode: "eval", Message: "Half", Partial: true},
		{At: at, Who: state.RoleAI, Mode: "repl", Message: "Done.", Output: strp("Done.\n")},
	}
}

// same compares events as records (what the reference's JSON holds).
func same(a, b []state.Event) bool {
	return reflect.DeepEqual(state.JSON(a), state.JSON(b))
}

func messages(events []state.Event) string {
	var out []string
	for _, e := range events {
		out = append(out, fmt.Sprint(e.Message))
	}
	return strings.Join(out, ",")
}

func testRoundTrip(t *testing.T, h Harness) {
	ctx := ctxOf(t)
	s := h.New(t)("")
	c := open(t, s, "user", "key")
	if c.Location() == "" || c.HistoryLocation() == "" {
		t.Error("a conversation without a location")
	}
	if where, err := s.Location(bot); err != nil || where == "" {
		t.Errorf("Location = %q, %v", where, err)
	}
	if h, err := c.History(ctx); err != nil || len(h) != 0 {
		t.Fatalf("a new conversation: %v, %v", h, err)
	}
	if l, err := s.List(ctx, bot); err != nil || len(l.Keys) != 0 || l.Unreadable != 0 {
		t.Fatalf("a new store lists %+v, %v", l, err)
	}
	turn, err := c.Begin(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	events := sample()
	if err := turn.Append(events[:2]...); err != nil {
		t.Fatal(err)
	}
	if err := turn.Append(events[2:]...); err != nil {
		t.Fatal(err)
	}
	if err := turn.Append(); err != nil {
		t.Fatal(err)
	}
	if !same(turn.History(), events) {
		t.Errorf("the turn's history:\n%v\nwant\n%v", state.JSON(turn.History()), state.JSON(events))
	}
	turn.End()
	turn.End()
	for _, view := range []state.Store{s, h.New(t)(""), s} {
		got, err := open(t, view, "user", "key").History(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if view == s && !same(got, events) {
			t.Errorf("read back:\n%v\nwant\n%v", state.JSON(got), state.JSON(events))
		}
	}
	// A read history written back unchanged is the same.
	got, _ := c.History(ctx)
	c2 := open(t, s, "user", "copy")
	if err := state.Append(ctx, c2, got...); err != nil {
		t.Fatal(err)
	}
	if again, _ := c2.History(ctx); !same(again, events) {
		t.Errorf("copied:\n%v\nwant\n%v", state.JSON(again), state.JSON(events))
	}
	l, err := s.List(ctx, bot)
	if err != nil || len(l.Keys) != 2 || l.Unreadable != 0 {
		t.Fatalf("List = %+v, %v", l, err)
	}
	for _, k := range l.Keys {
		if k.EndUser != "user" || (k.Key != "key" && k.Key != "copy") || k.Events != len(events) || k.LastActivity.IsZero() {
			t.Errorf("listed %+v", k)
		}
	}
}

// testIsolation: bots, end users and keys (any text) are apart.
func testIsolation(t *testing.T, h Harness) {
	ctx := ctxOf(t)
	s := h.New(t)("")
	names := []string{"k", "K", "../k", "a/b", ".", "..", "ü ñ", "%2F", "k\x00"}
	for i, name := range names {
		for _, user := range []string{"one", "two/../one"} {
			c := open(t, s, user, name)
			if err := state.Append(ctx, c, state.Event{Who: state.RoleUser, Message: fmt.Sprint(user, i)}); err != nil {
				t.Fatalf("key %q: %v", name, err)
			}
		}
	}
	other := state.Bot{Author: bot.Author, Name: bot.Name, Version: "2.0.0"}
	oc, err := s.Open(other, "one", "k")
	if err != nil {
		t.Fatal(err)
	}
	if h, err := oc.History(ctx); err != nil || len(h) != 0 {
		t.Errorf("another version of the bot sees %v, %v", h, err)
	}
	for i, name := range names {
		for _, user := range []string{"one", "two/../one"} {
			got, err := open(t, s, user, name).History(ctx)
			if err != nil || messages(got) != fmt.Sprint(user, i) {
				t.Errorf("key %q of %q: %q, %v", name, user, messages(got), err)
			}
		}
	}
	l, err := s.List(ctx, bot)
	if err != nil || len(l.Keys) != 2*len(names) {
		t.Fatalf("List: %d keys, %v", len(l.Keys), err)
	}
	seen := map[string]bool{}
	for _, k := range l.Keys {
		seen[k.EndUser+"\x01"+k.Key] = true
	}
	for _, name := range names {
		if !seen["one\x01"+name] || !seen["two/../one\x01"+name] {
			t.Errorf("key %q is not listed under its end users", name)
		}
	}
	if _, err := s.Open(state.Bot{Name: "no author"}, "u", "k"); err == nil {
		t.Error("a bot without an author opened a conversation")
	}
}

// testBusy: one exchange at a time, with a wait-or-busy choice.
func testBusy(t *testing.T, h Harness) {
	ctx := ctxOf(t)
	openStore := h.New(t)
	c := open(t, openStore(""), "u", "k")
	first, err := c.Begin(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	other := open(t, openStore(""), "u", "k")
	if _, err := other.Begin(ctx, nil); !errors.Is(err, state.ErrBusy) {
		t.Fatalf("Begin without waiting while held: %v, want ErrBusy", err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	told := 0
	if _, err := other.Begin(short, func() { told++ }); !errors.Is(err, context.DeadlineExceeded) || told != 1 {
		t.Fatalf("waiting Begin with an expiring context: %v, told %d times; want DeadlineExceeded, once", err, told)
	}
	busy := make(chan struct{}, 1)
	done := make(chan []state.Event, 1)
	go func() {
		defer close(done)
		second, err := other.Begin(ctx, func() { busy <- struct{}{} })
		if err != nil {
			t.Error(err)
			return
		}
		history := second.History()
		if err := second.Append(state.Event{Who: state.RoleUser, Message: "second"}); err != nil {
			t.Error(err)
		}
		// End before telling: the test then checks the key is free.
		second.End()
		done <- history
	}()
	select {
	case <-busy:
	case <-ctx.Done():
		t.Fatal("the waiting Begin never said it waits")
	}
	if err := first.Append(state.Event{Who: state.RoleUser, Message: "first"}, state.Event{Who: state.RoleAI, Message: "answer"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := other.History(ctx); messages(got) != "first,answer" {
		t.Errorf("History during the turn: %q", messages(got))
	}
	first.End()
	if got := <-done; messages(got) != "first,answer" {
		t.Errorf("the second turn began with %q: it did not see the first's events", messages(got))
	}
	if got, _ := c.History(ctx); messages(got) != "first,answer,second" {
		t.Errorf("history %q", messages(got))
	}
	again, err := c.Begin(ctx, nil)
	if err != nil {
		t.Fatalf("the conversation is still held after both turns ended: %v", err)
	}
	again.End()
}

// testConcurrentExchanges: exchanges from many processes on one key
// never interleave and lose nothing.
func testConcurrentExchanges(t *testing.T, h Harness) {
	ctx := ctxOf(t)
	openStore := h.New(t)
	const workers, rounds = 8, 5
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := open(t, openStore(""), "u", "shared")
			for r := range rounds {
				turn, err := c.Begin(ctx, func() {})
				if err != nil {
					t.Error(err)
					return
				}
				if n := len(turn.History()); n%2 != 0 {
					t.Errorf("a turn began on %d events: another exchange's events were cut", n)
				}
				id := fmt.Sprintf("%d.%d", w, r)
				if err := turn.Append(state.Event{Who: state.RoleUser, Message: id}); err != nil {
					t.Error(err)
				}
				if err := turn.Append(state.Event{Who: state.RoleAI, Message: id}); err != nil {
					t.Error(err)
				}
				turn.End()
			}
		}()
	}
	wg.Wait()
	got, err := open(t, openStore(""), "u", "shared").History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2*workers*rounds {
		t.Fatalf("%d events, want %d", len(got), 2*workers*rounds)
	}
	seen := map[any]bool{}
	for i := 0; i < len(got); i += 2 {
		if got[i].Who != state.RoleUser || got[i+1].Who != state.RoleAI || got[i].Message != got[i+1].Message {
			t.Fatalf("events %d and %d are not one exchange: %v %v", i, i+1, state.JSON(got[i:i+1]), state.JSON(got[i+1:i+2]))
		}
		if seen[got[i].Message] {
			t.Fatalf("exchange %v stored twice", got[i].Message)
		}
		seen[got[i].Message] = true
	}
}

// testCrash: a process dying between an append and its commit leaves the
// history whole (all of the append or none) and the conversation free.
func testCrash(t *testing.T, h Harness) {
	if h.Crash == nil {
		t.Fatal("the harness has no Crash: every store must say how its writer dies mid-append")
	}
	ctx := ctxOf(t)
	openStore := h.New(t)
	for _, password := range []string{"", "secret"} {
		c := open(t, openStore(password), "u", "crash"+password)
		turn, err := c.Begin(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := turn.Append(state.Event{Who: state.RoleUser, Message: "kept"}); err != nil {
			t.Fatal(err)
		}
		h.Crash(t, turn, []state.Event{{Who: state.RoleAI, Message: "torn-1"}, {Who: state.RoleAI, Message: "torn-2"}})
		after := open(t, openStore(password), "u", "crash"+password)
		next, err := after.Begin(ctx, func() {})
		if err != nil {
			t.Fatalf("after the crash: %v", err)
		}
		if m := messages(next.History()); m != "kept" && m != "kept,torn-1,torn-2" {
			t.Errorf("after the crash the history is %q: not whole", m)
		}
		if err := next.Append(state.Event{Who: state.RoleUser, Message: "next"}); err != nil {
			t.Fatalf("append after the crash: %v", err)
		}
		next.End()
		got, err := after.History(ctx)
		if err != nil || !strings.HasPrefix(messages(got), "kept") || !strings.HasSuffix(messages(got), ",next") {
			t.Errorf("history %q, %v", messages(got), err)
		}
	}
}

// testDeleteWhileLocked: a deletion waits for the exchange in progress
// (or gives up with its context, deleting nothing), then removes it all.
func testDeleteWhileLocked(t *testing.T, h Harness) {
	ctx := ctxOf(t)
	openStore := h.New(t)
	s := openStore("")
	c := open(t, s, "u", "k")
	turn, err := c.Begin(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := turn.Append(state.Event{Who: state.RoleUser, Message: "old"}); err != nil {
		t.Fatal(err)
	}
	if _, err := turn.KeepOutput("call_1", "whole output"); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := open(t, openStore(""), "u", "k").Delete(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Delete while held, with an expiring context: %v", err)
	}
	if got, _ := c.History(ctx); messages(got) != "old" {
		t.Fatalf("a Delete that gave up deleted: %q", messages(got))
	}
	type result struct {
		existed bool
		err     error
	}
	deleted := make(chan result, 1)
	go func() {
		existed, err := open(t, openStore(""), "u", "k").Delete(ctx)
		deleted <- result{existed, err}
	}()
	select {
	case r := <-deleted:
		t.Fatalf("Delete did not wait for the exchange: %+v", r)
	case <-time.After(100 * time.Millisecond):
	}
	if err := turn.Append(state.Event{Who: state.RoleAI, Message: "answer"}); err != nil {
		t.Fatalf("the exchange could not finish while a Delete waited: %v", err)
	}
	turn.End()
	r := <-deleted
	if r.err != nil || !r.existed {
		t.Fatalf("Delete = %v, %v", r.existed, r.err)
	}
	if got, err := c.History(ctx); err != nil || len(got) != 0 {
		t.Errorf("after Delete: %q, %v", messages(got), err)
	}
	if out, err := c.Output(ctx, "call_1"); err == nil {
		t.Errorf("a kept output survived Delete: %q", out)
	}
	if l, err := s.List(ctx, bot); err != nil || len(l.Keys) != 0 {
		t.Errorf("after Delete, List = %+v, %v", l, err)
	}
	if existed, err := c.Delete(ctx); err != nil || existed {
		t.Errorf("deleting again: %v, %v; want false, nil", existed, err)
	}
	if existed, err := open(t, s, "u", "never").Delete(ctx); err != nil || existed {
		t.Errorf("deleting a conversation never stored: %v, %v", existed, err)
	}
	// The key can be used again.
	if err := state.Append(ctx, c, state.Event{Who: state.RoleUser, Message: "new"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := c.History(ctx); messages(got) != "new" {
		t.Errorf("reused key: %q", messages(got))
	}
}

// testListUnreadable: a listing shows the conversations stored with its
// password and counts the others, never fails on them.
func testListUnreadable(t *testing.T, h Harness) {
	ctx := ctxOf(t)
	openStore := h.New(t)
	for i, pw := range []string{"one", "one", "two", ""} {
		c := open(t, openStore(pw), fmt.Sprint("user", i), fmt.Sprint("K", i))
		if err := state.Append(ctx, c, state.Event{Who: state.RoleUser, Message: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	// K0 is written last: it is the most recent.
	time.Sleep(20 * time.Millisecond)
	if err := state.Append(ctx, open(t, openStore("one"), "user0", "K0"), state.Event{Who: state.RoleAI, Message: "y"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		password   string
		keys       string
		unreadable int
	}{{"one", "K0/user0/2,K1/user1/1", 2}, {"two", "K2/user2/1", 3}, {"", "K3/user3/1", 3}, {"three", "", 4}} {
		l, err := openStore(tc.password).List(ctx, bot)
		if err != nil {
			t.Errorf("List with password %q: %v", tc.password, err)
			continue
		}
		var keys []string
		for _, k := range l.Keys {
			keys = append(keys, fmt.Sprintf("%s/%s/%d", k.Key, k.EndUser, k.Events))
		}
		if strings.Join(keys, ",") != tc.keys || l.Unreadable != tc.unreadable {
			t.Errorf("List with password %q: %v and %d unreadable; want %s and %d", tc.password, keys, l.Unreadable, tc.keys, tc.unreadable)
		}
	}
	if got, err := open(t, openStore("two"), "user0", "K0").History(ctx); err == nil && len(got) > 0 {
		t.Errorf("read a conversation with the wrong password: %q", messages(got))
	}
}

// testMany: a store lists 10,000 conversations.
func testMany(t *testing.T, h Harness) {
	n := h.Many
	if n == 0 {
		n = 10000
	}
	ctx := ctxOf(t)
	s := h.New(t)("")
	const workers = 8
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				c, err := s.Open(bot, fmt.Sprint("user", i%10), fmt.Sprint("key", i))
				if err == nil {
					err = state.Append(ctx, c, state.Event{Who: state.RoleUser, Message: fmt.Sprint(i)})
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	start := time.Now()
	l, err := s.List(ctx, bot)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("listed %d conversations in %v", len(l.Keys), time.Since(start))
	if len(l.Keys) != n || l.Unreadable != 0 {
		t.Fatalf("List: %d keys and %d unreadable, want %d", len(l.Keys), l.Unreadable, n)
	}
	seen := make(map[string]bool, n)
	for j, k := range l.Keys {
		var i int
		if _, err := fmt.Sscanf(k.Key, "key%d", &i); err != nil || k.Events != 1 || k.EndUser != fmt.Sprint("user", i%10) {
			t.Fatalf("listed %+v", k)
		}
		if j > 0 && k.LastActivity.After(l.Keys[j-1].LastActivity) {
			t.Fatalf("not most recent first at %d", j)
		}
		seen[k.Key] = true
	}
	if len(seen) != n {
		t.Fatalf("%d distinct keys, want %d", len(seen), n)
	}
}

// testLargeOutputs: whole tool outputs are kept per call and deleted
// with the conversation.
func testLargeOutputs(t *testing.T, h Harness) {
	ctx := ctxOf(t)
	s := h.New(t)("")
	c := open(t, s, "u", "k")
	turn, err := c.Begin(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer turn.End()
	big := strings.Repeat("0123456789abcdé\n", 256*1024) // 4.2 MB
	ids := []string{"call_1", "../../escape", "a/b.c", ""}
	wheres := map[string]bool{}
	for i, id := range ids {
		text := fmt.Sprint(i) + big
		where, err := turn.KeepOutput(id, text)
		if err != nil {
			t.Fatalf("KeepOutput(%q): %v", id, err)
		}
		if where == "" || wheres[where] {
			t.Errorf("KeepOutput(%q) kept it at %q", id, where)
		}
		wheres[where] = true
	}
	for i, id := range ids {
		got, err := c.Output(ctx, id)
		if err != nil || got != fmt.Sprint(i)+big {
			t.Errorf("Output(%q): %d bytes, %v", id, len(got), err)
		}
	}
	if _, err := turn.KeepOutput("call_1", "replaced"); err != nil {
		t.Fatal(err)
	}
	if got, err := c.Output(ctx, "call_1"); err != nil || got != "replaced" {
		t.Errorf("kept again: %q, %v", got, err)
	}
	if _, err := c.Output(ctx, "never"); err == nil {
		t.Error("an output never kept was found")
	}
	if _, err := open(t, s, "u", "other").Output(ctx, "call_1"); err == nil {
		t.Error("another conversation sees the output")
	}
}

// testLeaseTakeover: a holder whose lease expired loses the conversation
// to the next exchange, and its appends fail with ErrLost instead of
// mixing with the new holder's.
func testLeaseTakeover(t *testing.T, h Harness) {
	if h.Expire == nil {
		t.Skip("the store holds a conversation as long as its holder's process lives (no lease to expire)")
	}
	ctx := ctxOf(t)
	openStore := h.New(t)
	c := open(t, openStore(""), "u", "k")
	old, err := c.Begin(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer old.End()
	if err := old.Append(state.Event{Who: state.RoleUser, Message: "before"}); err != nil {
		t.Fatal(err)
	}
	h.Expire(t, old)
	next, err := open(t, openStore(""), "u", "k").Begin(ctx, func() {})
	if err != nil {
		t.Fatalf("after the lease expired: %v", err)
	}
	if err := old.Append(state.Event{Who: state.RoleAI, Message: "late"}); !errors.Is(err, state.ErrLost) {
		t.Errorf("the old holder's Append: %v, want ErrLost", err)
	}
	if err := next.Append(state.Event{Who: state.RoleAI, Message: "after"}); err != nil {
		t.Fatal(err)
	}
	next.End()
	old.End()
	if got, _ := c.History(ctx); messages(got) != "before,after" {
		t.Errorf("history %q", messages(got))
	}
}
