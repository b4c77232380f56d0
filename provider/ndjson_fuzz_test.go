package provider

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// chunkReader returns at most n bytes per Read, as a network does.
type chunkReader struct {
	data []byte
	n    int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	k := min(len(p), r.n, len(r.data))
	copy(p, r.data[:k])
	r.data = r.data[k:]
	return k, nil
}

// FuzzNDJSONReader: whatever the bytes and however they are split across
// reads, the reader returns the non-blank lines, trimmed, in order.
func FuzzNDJSONReader(f *testing.F) {
	f.Add("{\"a\":1}\n\n{\"b\":2}\r\n  \n{\"c\":3}", uint8(1))
	f.Add("{\"done\":true}", uint8(200))
	f.Add("\n\n\n", uint8(2))
	f.Add("x\ry\n", uint8(3))
	f.Fuzz(func(t *testing.T, in string, split uint8) {
		var want []string
		for _, l := range strings.Split(in, "\n") {
			if l = string(bytes.TrimSpace([]byte(l))); l != "" {
				want = append(want, l)
			}
		}
		r := NewNDJSONReader(&chunkReader{data: []byte(in), n: int(split) + 1})
		for i := 0; ; i++ {
			line, err := r.Next()
			if err == io.EOF {
				if i != len(want) {
					t.Fatalf("%d lines, want %d: %q", i, len(want), want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if i >= len(want) || string(line) != want[i] {
				t.Fatalf("line %d = %q, want %q", i, line, want)
			}
		}
	})
}
