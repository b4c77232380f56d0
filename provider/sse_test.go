package provider

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

func readAllSSE(t *testing.T, r io.Reader) []SSEEvent {
	t.Helper()
	s := NewSSEReader(r)
	var out []SSEEvent
	for {
		ev, err := s.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		ev.Data = bytes.Clone(ev.Data) // valid until the next call only
		out = append(out, ev)
	}
}

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []SSEEvent
	}{
		{"simple", "data: a\n\ndata: b\n\n", []SSEEvent{{Data: []byte("a")}, {Data: []byte("b")}}},
		{"keep-alive comments", ": ping\n\n: OPENROUTER PROCESSING\n\ndata: x\n\n", []SSEEvent{{Data: []byte("x")}}},
		{"multi-line data", "data: a\ndata: b\n\n", []SSEEvent{{Data: []byte("a\nb")}}},
		{"event and id", "event: message_start\nid: 7\ndata: {}\n\n", []SSEEvent{{Event: "message_start", ID: "7", Data: []byte("{}")}}},
		{"CRLF", "data: a\r\n\r\ndata: b\r\n\r\n", []SSEEvent{{Data: []byte("a")}, {Data: []byte("b")}}},
		{"CR", "data: a\r\rdata: b\r\r", []SSEEvent{{Data: []byte("a")}, {Data: []byte("b")}}},
		{"no space after colon", "data:a\n\n", []SSEEvent{{Data: []byte("a")}}},
		{"unterminated last event", "data: a\n\ndata: b", []SSEEvent{{Data: []byte("a")}, {Data: []byte("b")}}},
		{"retry ignored", "retry: 100\ndata: a\n\n", []SSEEvent{{Data: []byte("a")}}},
		{"empty data line", "data\n\n", []SSEEvent{{Data: nil}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := readAllSSE(t, strings.NewReader(tt.in))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			// The same input delivered one byte per read gives the same events.
			got = readAllSSE(t, iotest.OneByteReader(strings.NewReader(tt.in)))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("one byte at a time (-want +got):\n%s", diff)
			}
		})
	}
}

// A stream with CR line endings longer than the read buffer: every event
// arrives, none merged with the next.
func TestSSEReaderLongCRStream(t *testing.T) {
	var b strings.Builder
	const n = 5000
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "data: %040d\r\r", i)
	}
	for _, r := range []io.Reader{strings.NewReader(b.String()), iotest.HalfReader(strings.NewReader(b.String()))} {
		got := readAllSSE(t, r)
		if len(got) != n {
			t.Fatalf("got %d events, want %d", len(got), n)
		}
		for i, ev := range got {
			if want := fmt.Sprintf("%040d", i); string(ev.Data) != want {
				t.Fatalf("event %d: %q, want %q", i, ev.Data, want)
			}
		}
	}
}

func TestNDJSONReader(t *testing.T) {
	in := "{\"a\":1}\n\n  {\"b\":2}\r\n{\"c\":3}"
	r := NewNDJSONReader(iotest.HalfReader(strings.NewReader(in)))
	var got []string
	for {
		l, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(l))
	}
	want := []string{`{"a":1}`, `{"b":2}`, `{"c":3}`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lines (-want +got):\n%s", diff)
	}
}

func TestNDJSONLongLine(t *testing.T) {
	long := `{"x":"` + strings.Repeat("y", 200<<10) + `"}`
	r := NewNDJSONReader(strings.NewReader(long + "\n"))
	l, err := r.Next()
	if err != nil || string(l) != long {
		t.Fatalf("long line: err %v, len %d", err, len(l))
	}
}

func FuzzSSEReader(f *testing.F) {
	f.Add("data: a\n\n")
	f.Add(": c\r\nevent: x\rdata: y\n\n")
	f.Add("data: [DONE]\n\n")
	f.Fuzz(func(t *testing.T, in string) {
		s := NewSSEReader(strings.NewReader(in))
		// Every event takes at least a field and a line end from the
		// input: a reader that returns more events than the input has
		// bytes has stopped advancing, and would loop forever.
		for events := 0; ; events++ {
			if events > len(in) {
				t.Fatalf("%d events from %d bytes of input: the reader does not advance", events, len(in))
			}
			if _, err := s.Next(); err != nil {
				return
			}
		}
	})
}

func TestThinkFilter(t *testing.T) {
	tests := []struct {
		chunks             []string
		visible, reasoning string
	}{
		{[]string{"Hello"}, "Hello", ""},
		{[]string{"<think>hmm</think>Hi"}, "Hi", "hmm"},
		{[]string{"<thi", "nk>a", "b</th", "ink>\n\nHi"}, "Hi", "ab"},
		{[]string{"\n<think>x</think>", "Hi"}, "Hi", "x"},
		{[]string{"I <think> not"}, "I <think> not", ""},
		{[]string{"<", "b>"}, "<b>", ""},
		{[]string{"<think>unfinished"}, "", "unfinished"},
	}
	for _, tt := range tests {
		var f ThinkFilter
		var v, r string
		for _, c := range tt.chunks {
			a, b := f.Feed(c)
			v += a
			r += b
		}
		a, b := f.Flush()
		v += a
		r += b
		if v != tt.visible || r != tt.reasoning {
			t.Errorf("%q: visible %q reasoning %q, want %q %q", tt.chunks, v, r, tt.visible, tt.reasoning)
		}
	}
}

func TestAnswer(t *testing.T) {
	var events []Event
	a := Answer{Emit: func(ev Event) { events = append(events, ev) }}
	a.Reasoning("plan ")
	a.Content("<think>hm")
	if a.Streamed {
		t.Fatal("streamed before any visible text")
	}
	a.Content("m</think>\nHel")
	a.Content("lo")
	var resp Response
	a.Finish(&resp)
	if resp.Text != "Hello" || resp.Reasoning != "plan hmm" || !a.Streamed {
		t.Fatalf("%+v streamed=%v", resp, a.Streamed)
	}
	want := []Event{{ReasoningDelta, "plan "}, {ReasoningDelta, "hm"}, {ReasoningDelta, "m"}, {TextDelta, "Hel"}, {TextDelta, "lo"}}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if v, r := SplitThink("<think>x</think>\n\ny"); v != "y" || r != "x" {
		t.Errorf("SplitThink: %q %q", v, r)
	}
}

// A closed reader gives its buffer back and reads no more; the next
// reader starts clean on its own input.
func TestSSEReaderClose(t *testing.T) {
	s := NewSSEReader(strings.NewReader("data: one\n\ndata: two\n\n"))
	ev, err := s.Next()
	if err != nil || string(ev.Data) != "one" {
		t.Fatalf("%q %v", ev.Data, err)
	}
	s.Close()
	s.Close()
	if _, err := s.Next(); err != io.ErrClosedPipe {
		t.Errorf("after Close: %v", err)
	}
	for range 3 {
		s = NewSSEReader(strings.NewReader("data: three\n\n"))
		if ev, err := s.Next(); err != nil || string(ev.Data) != "three" {
			t.Fatalf("%q %v", ev.Data, err)
		}
		if _, err := s.Next(); err != io.EOF {
			t.Errorf("the reused buffer held more: %v", err)
		}
		s.Close()
	}
}
