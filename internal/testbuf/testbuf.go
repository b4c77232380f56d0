// Package testbuf is a buffer that goroutines write to while a test reads
// it: the log of a server under test, the standard error of a child, the
// warnings of a component.
package testbuf

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent use. The zero value is
// empty and ready.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// Line appends msg and a line break: a warning sink (func(string)).
func (s *Buffer) Line(msg string) { s.Write([]byte(msg + "\n")) } //nolint:errcheck // never fails

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
