package mcp

import (
	"bytes"
	"strings"
	"testing"
)

// A program that writes on its standard error without ever ending a
// line (a progress bar redrawn with \r) does not make nb keep all of
// it: what goes to the sink is cut into lines of a bounded length.
func TestTailBoundsAnUnendedLine(t *testing.T) {
	var sink bytes.Buffer
	tl := newTail("srv", &sink)
	chunk := []byte(strings.Repeat("x", 1000) + "\r")
	for range 1000 {
		tl.Write(chunk) //nolint:errcheck // never fails
	}
	tl.mu.Lock()
	kept := len(tl.line)
	tl.mu.Unlock()
	if kept > maxSinkLine {
		t.Errorf("%d bytes kept for an unended line, want at most %d", kept, maxSinkLine)
	}
	if !strings.HasPrefix(sink.String(), "[srv] xxx") {
		t.Errorf("the sink got %.40q", sink.String())
	}
	if len(tl.Tail()) > tailBytes {
		t.Errorf("tail of %d bytes", len(tl.Tail()))
	}
}
