package eventlog

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/tool"
)

// Output is kept in order, replayed from any byte offset, and cut at the
// log's bytes.
func TestOutputReplayAndCut(t *testing.T) {
	l := New(2*pageSize + 10)
	var want strings.Builder
	for i := range 20000 {
		s := fmt.Sprintf("piece %d;", i)
		l.WriteString(s)
		want.WriteString(s)
	}
	out, st := l.Output(0)
	if !st.Cut || len(out) > 2*pageSize+10 || !strings.HasPrefix(want.String(), out) {
		t.Fatalf("cut %v, %d bytes kept of %d; prefix kept: %v", st.Cut, len(out), want.Len(), strings.HasPrefix(want.String(), out))
	}
	if st.Size > 2*pageSize+10+3*pageSize {
		t.Fatalf("the log takes %d bytes for %d of output", st.Size, len(out))
	}
	for _, from := range []int{0, 1, pageSize - 1, pageSize, pageSize + 7, len(out) - 1, len(out), len(out) + 5, -3} {
		got, _ := l.Output(from)
		if exp := out[min(max(from, 0), len(out)):]; got != exp {
			t.Fatalf("from %d: %d bytes, want %d", from, len(got), len(exp))
		}
	}
}

// Events come back in order from any event number, the output of one run
// as one event, and output after a read as a new one.
func TestEventsReplay(t *testing.T) {
	l := New(0)
	l.WriteString("a")
	l.WriteString("b")
	l.Append(Event{Kind: Data, Data: 1})
	l.WriteString("c")
	evs, st := l.Events(0)
	if got := describe(evs); got != "out:ab data:1 out:c" || st.Events != 3 {
		t.Fatalf("events %q (%d)", got, st.Events)
	}
	l.WriteString("d")
	l.Finish(nil, "")
	evs, st = l.Events(st.Events)
	if got := describe(evs); got != "out:d" || st.Status != Finished {
		t.Fatalf("after the first read: %q, %v", got, st.Status)
	}
	if l.Append(Event{Kind: Data, Data: 2}) {
		t.Fatal("an ended log took an event")
	}
	if evs, _ := l.Events(1); describe(evs) != "data:1 out:c out:d" {
		t.Fatalf("replay from 1: %q", describe(evs))
	}
}

func describe(evs []Event) string {
	var parts []string
	for _, e := range evs {
		switch e.Kind {
		case Output:
			parts = append(parts, "out:"+e.Text)
		case Data:
			parts = append(parts, fmt.Sprint("data:", e.Data))
		case Ask:
			parts = append(parts, "ask:"+e.Question.ID)
		}
	}
	return strings.Join(parts, " ")
}

// A follower sees every piece as it comes, whatever the writer's pace.
func TestFollow(t *testing.T) {
	l := New(0)
	var wg sync.WaitGroup
	var got strings.Builder
	wg.Add(1)
	go func() {
		defer wg.Done()
		from := 0
		for {
			st := l.Wait(context.Background(), 1<<30, from, 0)
			out, st2 := l.Output(from)
			got.WriteString(out)
			from = st2.TextLen
			if st.Status != Open && from == st.TextLen {
				return
			}
		}
	}()
	var want strings.Builder
	for i := range 500 {
		s := fmt.Sprint(i, ",")
		want.WriteString(s)
		l.WriteString(s)
	}
	l.Finish(errors.New("boom"), "")
	wg.Wait()
	if got.String() != want.String() {
		t.Fatalf("follower read %d bytes, want %d", got.Len(), want.Len())
	}
	if st := l.State(); st.Status != Failed || st.Err != "boom" {
		t.Fatalf("state %+v", st)
	}
}

// A question is an event; its answer comes through the log, once.
func TestAskAnswer(t *testing.T) {
	l := New(0)
	c := Confirmer{Log: l, Timeout: 5 * time.Second}
	done := make(chan bool)
	go func() {
		ok, err := c.Confirm(context.Background(), tool.Call{ID: "c1", Name: "rm", Arguments: map[string]any{"path": "/"}}, "rm /")
		done <- ok && err == nil
	}()
	st := l.Wait(context.Background(), 0, 0, 5*time.Second)
	evs, _ := l.Events(0)
	if st.Events != 1 || evs[0].Kind != Ask || evs[0].Question.Kind != Confirm || evs[0].Question.Text != "rm /" {
		t.Fatalf("events %+v", evs)
	}
	if err := l.Answer("c1", RunTool, Reply{}); err == nil {
		t.Fatal("a tool result answered a confirmation")
	}
	if err := l.Answer("c1", Confirm, Reply{Allow: true}); err != nil {
		t.Fatal(err)
	}
	if !<-done {
		t.Fatal("the confirmation was not allowed")
	}
	var ae *AnswerError
	if err := l.Answer("c1", Confirm, Reply{Allow: true}); !errors.As(err, &ae) || !ae.Again {
		t.Fatalf("a second answer: %v", err)
	}
	if err := l.Answer("zz", Confirm, Reply{}); !errors.As(err, &ae) || ae.Again || !strings.Contains(err.Error(), "no confirm zz is waiting") {
		t.Fatalf("an unknown answer: %v", err)
	}
}

// A question nobody answers times out, or ends with its context or its
// log; it cannot be answered afterwards.
func TestAskTimeoutCancelClose(t *testing.T) {
	l := New(0)
	p, _ := l.Ask(Question{ID: "t", Kind: RunTool, Name: "x"})
	_, err := p.Wait(context.Background(), 20*time.Millisecond)
	var te *TimeoutError
	if !errors.As(err, &te) || err.Error() != "no tool_result for t within 20ms" {
		t.Fatalf("timeout: %v", err)
	}
	if err := l.Answer("t", RunTool, Reply{}); err == nil {
		t.Fatal("a question no longer waited for took an answer")
	}
	ctx, cancel := context.WithCancel(context.Background())
	p, _ = l.Ask(Question{ID: "c", Kind: Confirm})
	cancel()
	if _, err := p.Wait(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	p, _ = l.Ask(Question{ID: "e", Kind: Confirm})
	l.Finish(nil, "")
	if _, err := p.Wait(context.Background(), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed: %v", err)
	}
	if _, err := l.Ask(Question{ID: "f", Kind: Confirm}); !errors.Is(err, ErrClosed) {
		t.Fatalf("asked an ended log: %v", err)
	}
}

// A store gives a value only to its owner, forgets the oldest beyond its
// count or bytes (ended logs before open ones, which it fails), and
// forgets ended ones after their time.
func TestStore(t *testing.T) {
	now := time.Unix(1000, 0)
	var evicted []string
	s := NewStore(Limits{Count: 3, Bytes: 4 * pageSize, TTL: time.Minute}, func() time.Time { return now },
		func(id string, _ *Log) { evicted = append(evicted, id) })
	logs := map[string]*Log{}
	for _, id := range []string{"a", "b", "c"} {
		logs[id] = New(0)
		s.Put(id, "alice", logs[id], 0)
	}
	if _, ok := s.Get("a", "bob"); ok {
		t.Fatal("bob got alice's log")
	}
	if s.Delete("a", "bob") {
		t.Fatal("bob deleted alice's log")
	}
	if l, ok := s.Get("a", "alice"); !ok || l != logs["a"] || l.ID() != "a" {
		t.Fatal("alice lost her log")
	}
	logs["b"].Finish(nil, "")
	logs["d"] = New(0)
	s.Put("d", "alice", logs["d"], 0) // over the count: b ended, a is the oldest open
	if _, ok := s.Get("b", "alice"); ok {
		t.Fatal("the ended log was kept over an open one")
	}
	if _, ok := s.Get("a", "alice"); !ok || len(evicted) != 0 {
		t.Fatalf("an open log was forgotten (%v)", evicted)
	}
	// Bytes: a grows past what the store keeps; the oldest open goes.
	logs["a"].WriteString(strings.Repeat("x", 3*pageSize))
	logs["c"].WriteString(strings.Repeat("y", 2*pageSize))
	if n, b := s.Stats(); b > 4*pageSize || n != 2 {
		t.Fatalf("%d logs, %d bytes kept", n, b)
	}
	if fmt.Sprint(evicted) != "[a]" || logs["a"].State().Status != Failed || logs["a"].State().Err != ErrEvicted.Error() {
		t.Fatalf("evicted %v, a is %+v", evicted, logs["a"].State())
	}
	if logs["a"].WriteString("more"); logs["a"].State().TextLen != 3*pageSize {
		t.Fatal("a forgotten log kept growing")
	}
	// Time: an ended log goes TTL after it ended, an open one stays.
	logs["c"].Finish(nil, "")
	now = now.Add(2 * time.Minute)
	s.Sweep(0)
	if _, ok := s.Get("c", "alice"); ok {
		t.Fatal("an expired log was kept")
	}
	if _, ok := s.Get("d", "alice"); !ok {
		t.Fatal("an open log expired")
	}
	// Plain values expire TTL after they were put; one larger than the
	// store is refused.
	v := NewStore[string](Limits{Count: 10, Bytes: 100, TTL: time.Minute}, func() time.Time { return now }, nil)
	if v.Put("big", "", "x", 101) || !v.Put("k", "", "v", 10) {
		t.Fatal("sizes")
	}
	now = now.Add(time.Minute)
	if _, ok := v.Get("k", ""); ok {
		t.Fatal("a value outlived its time")
	}
}

// Sweep reports the open logs nobody reads or watches.
func TestSweepAbandoned(t *testing.T) {
	s := NewStore[*Log](Limits{Count: 10, Bytes: 1 << 20, TTL: time.Minute}, nil, nil)
	read, watched, idle := New(0), New(0), New(0)
	for id, l := range map[string]*Log{"read": read, "watched": watched, "idle": idle} {
		s.Put(id, "", l, 0)
	}
	stop := watched.Watch()
	defer stop()
	time.Sleep(30 * time.Millisecond)
	read.Seen()
	got := s.Sweep(20 * time.Millisecond)
	if len(got) != 1 || got[0] != idle {
		t.Fatalf("abandoned: %d logs", len(got))
	}
}

// BenchmarkAppend is the cost of appending a streamed piece of text (a
// typical 20-byte delta) to a log in a store.
func BenchmarkAppend(b *testing.B) {
	s := NewStore[*Log](Limits{Count: 10, Bytes: 1 << 40, TTL: time.Minute}, nil, nil)
	l := New(1 << 40)
	s.Put("x", "", l, 0)
	piece := "a streamed delta, 20"
	b.SetBytes(int64(len(piece)))
	b.ReportAllocs()
	for b.Loop() {
		l.WriteString(piece)
	}
}

// BenchmarkReplay is the cost of replaying 1 MiB of output written in
// 20-byte pieces, from the start (a client that reconnects).
func BenchmarkReplay(b *testing.B) {
	l := New(0)
	piece := "a streamed delta, 20"
	for range (1 << 20) / len(piece) {
		l.WriteString(piece)
	}
	_, st := l.Output(0)
	b.SetBytes(int64(st.TextLen))
	b.ReportAllocs()
	for b.Loop() {
		l.Output(0)
	}
}

// A store of values (the OpenAI API's stored responses and rounds)
// keeps at most Count entries and Bytes bytes, oldest out
// first, and forget entries after TTL.
func TestStoreValueBounds(t *testing.T) {
	now := time.Unix(1000, 0)
	m := NewStore[string](Limits{Count: 3, Bytes: 100, TTL: time.Minute}, func() time.Time { return now }, nil)
	for _, k := range []string{"a", "b", "c", "d"} {
		m.Put(k, "", k, 10)
	}
	if _, ok := m.Get("a", ""); ok {
		t.Error("a is kept past the count")
	}
	if n, b := m.Stats(); n != 3 || b != 30 {
		t.Errorf("%d entries, %d bytes", n, b)
	}
	m.Put("big", "", "big", 81) // 111 bytes: b and c go
	for k, want := range map[string]bool{"b": false, "c": false, "d": true, "big": true} {
		if _, ok := m.Get(k, ""); ok != want {
			t.Errorf("%s kept: %v", k, ok)
		}
	}
	if m.Put("huge", "", "huge", 101) {
		t.Error("an entry larger than the store is kept")
	}
	now = now.Add(time.Minute)
	if _, ok := m.Get("d", ""); ok {
		t.Error("d is kept past its time")
	}
	m.Put("e", "", "e", 1)
	if n, b := m.Stats(); n != 1 || b != 1 {
		t.Errorf("after expiry: %d entries, %d bytes", n, b)
	}
	if !m.Delete("e", "") || m.Delete("e", "") {
		t.Error("delete")
	}
}
