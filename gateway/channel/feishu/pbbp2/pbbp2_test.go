package pbbp2

import "testing"

func TestFrameRoundTrip(t *testing.T) {
	f := &Frame{SeqID: 3, LogID: 1 << 40, Service: 7, Method: MethodData, Headers: []Header{{"type", "event"}, {"sum", "1"}}, Payload: []byte(`{"a":1}`), LogIDNew: "x"}
	g, err := Unmarshal(f.Marshal())
	if err != nil {
		t.Fatal(err)
	}
	if g.SeqID != 3 || g.LogID != 1<<40 || g.Service != 7 || g.Method != 1 || g.Header("type") != "event" || g.Header("sum") != "1" || string(g.Payload) != `{"a":1}` || g.LogIDNew != "x" {
		t.Errorf("round trip %+v", g)
	}
	// A field the platform may add (number 12, varint) is skipped.
	extra := append(f.Marshal(), 12<<3, 5)
	if g, err := Unmarshal(extra); err != nil || g.Header("type") != "event" {
		t.Errorf("with an unknown field: %v", err)
	}
}

func FuzzUnmarshal(f *testing.F) {
	f.Add((&Frame{Method: 1, Headers: []Header{{"type", "ping"}}, Payload: []byte("x")}).Marshal())
	f.Add([]byte{0x42, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := Unmarshal(b)
		if err != nil {
			return
		}
		if _, err := Unmarshal(g.Marshal()); err != nil {
			t.Errorf("a decoded frame does not decode again: %v", err)
		}
	})
}
