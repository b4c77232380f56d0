package provider

import (
	"bufio"
	"bytes"
	"io"
	"sync"
)

// SSEEvent is one server-sent event.
type SSEEvent struct {
	// Event is the event: field; empty for the default "message" type.
	Event string
	// Data is the data: lines joined with "\n". It is valid until the
	// next call to Next.
	Data []byte
	// ID is the last id: field seen.
	ID string
}

// SSEReader reads server-sent events as the WHATWG EventSource rules say:
// fields per line, events separated by a blank line, ":" comments (used as
// keep-alives) ignored, multi-line data joined with "\n", CRLF, CR or LF
// line endings, and frames split anywhere across reads.
type SSEReader struct {
	r       *bufio.Reader
	lastID  string
	event   string
	data    bytes.Buffer
	hasData bool
	line    []byte
	// skipLF is set after a line ended with CR: an LF right after it
	// belongs to that CRLF.
	skipLF bool
}

// MaxLine bounds one line of a streamed response (16 MiB).
const MaxLine = 16 << 20

// NewSSEReader returns a reader of the events in r. Close gives its
// buffer back for the next reader.
func NewSSEReader(r io.Reader) *SSEReader {
	return &SSEReader{r: newReader(r)}
}

// readerSize is the buffer of a stream's reader. It holds lines, not
// whole answers, so it is small: a server holds thousands of streams at
// once. A longer line is gathered piece by piece.
const readerSize = 4 << 10

// newReader is a buffered reader of r, reused when one is free.
func newReader(r io.Reader) *bufio.Reader {
	br, _ := readers.Get().(*bufio.Reader)
	if br == nil {
		return bufio.NewReaderSize(r, readerSize)
	}
	br.Reset(r)
	return br
}

func putReader(br *bufio.Reader) {
	br.Reset(nil)
	readers.Put(br)
}

// readers keeps the read buffers of finished streams for the next: a
// server reads many streams a second.
var readers sync.Pool

// Close ends the reading: the reader's buffer goes back to be reused and
// Next returns io.ErrClosedPipe. The events' Data stay valid. Close does
// not close the underlying reader.
func (s *SSEReader) Close() {
	if s.r == nil {
		return
	}
	putReader(s.r)
	s.r = nil
}

// Next returns the next event. At the end of the stream it returns io.EOF;
// an event not terminated by a blank line before the end is still returned
// first (servers often close without the final blank line).
func (s *SSEReader) Next() (SSEEvent, error) {
	if s.r == nil {
		return SSEEvent{}, io.ErrClosedPipe
	}
	for {
		line, err := s.readLine()
		if err != nil {
			if err == io.EOF && (s.hasData || s.event != "") {
				return s.dispatch(), nil
			}
			return SSEEvent{}, err
		}
		if len(line) == 0 {
			if !s.hasData && s.event == "" {
				continue
			}
			return s.dispatch(), nil
		}
		if line[0] == ':' {
			continue // comment, keep-alive
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "event":
			s.event = string(value)
		case "data":
			if s.hasData {
				s.data.WriteByte('\n')
			}
			s.data.Write(value)
			s.hasData = true
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				s.lastID = string(value)
			}
		}
	}
}

func (s *SSEReader) dispatch() SSEEvent {
	ev := SSEEvent{Event: s.event, Data: s.data.Bytes(), ID: s.lastID}
	s.event = ""
	s.data.Reset()
	s.hasData = false
	return ev
}

// readLine returns one line without its terminator (LF, CRLF or CR).
// The slice is valid until the next call. A line is returned as soon as
// its terminator arrives; the LF of a CRLF split across reads is skipped
// at the next call.
func (s *SSEReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		n := s.r.Buffered()
		if n == 0 {
			if _, err := s.r.Peek(1); err != nil {
				if err == io.EOF && len(s.line) > 0 {
					return s.line, nil // the last line, without a terminator
				}
				return nil, err
			}
			n = s.r.Buffered()
		}
		buf, _ := s.r.Peek(n)
		if s.skipLF {
			s.skipLF = false
			if buf[0] == '\n' {
				s.r.Discard(1) //nolint:errcheck // buffered
				continue
			}
		}
		end := bytes.IndexByte(buf, '\n')
		if end < 0 {
			end = len(buf)
		}
		if i := bytes.IndexByte(buf[:end], '\r'); i >= 0 {
			end = i
		}
		if end == len(buf) {
			// No terminator buffered yet: keep the piece and read on.
			if len(s.line)+len(buf) > MaxLine {
				return nil, errLineTooLong
			}
			s.line = append(s.line, buf...)
			s.r.Discard(len(buf)) //nolint:errcheck // buffered
			continue
		}
		s.skipLF = buf[end] == '\r'
		line := buf[:end]
		if len(s.line) > 0 {
			s.line = append(s.line, line...)
			line = s.line
		}
		s.r.Discard(end + 1) //nolint:errcheck // buffered
		return line, nil
	}
}

type lineTooLongError struct{}

func (lineTooLongError) Error() string { return "a line of the response is longer than 16 MiB" }

var errLineTooLong error = lineTooLongError{}

// NDJSONReader reads newline-delimited JSON values, one per line, skipping
// blank lines. Lines may arrive split across reads.
type NDJSONReader struct {
	r *bufio.Reader
}

// NewNDJSONReader returns a reader of the lines in r. Close gives its
// buffer back for the next reader.
func NewNDJSONReader(r io.Reader) *NDJSONReader {
	return &NDJSONReader{r: newReader(r)}
}

// Close ends the reading: the reader's buffer goes back to be reused and
// Next returns io.ErrClosedPipe. Lines already returned stay valid.
func (n *NDJSONReader) Close() {
	if n.r == nil {
		return
	}
	putReader(n.r)
	n.r = nil
}

// Next returns the next non-blank line, without its terminator, or io.EOF.
func (n *NDJSONReader) Next() ([]byte, error) {
	if n.r == nil {
		return nil, io.ErrClosedPipe
	}
	var buf []byte
	for {
		chunk, err := n.r.ReadSlice('\n')
		buf = append(buf, chunk...)
		if err == bufio.ErrBufferFull {
			if len(buf) > MaxLine {
				return nil, errLineTooLong
			}
			continue
		}
		line := bytes.TrimSpace(buf)
		if err != nil {
			if err == io.EOF && len(line) > 0 {
				return line, nil
			}
			return nil, err
		}
		if len(line) == 0 {
			buf = buf[:0]
			continue
		}
		return line, nil
	}
}
