package email

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"mime"
	"net/textproto"
	"strings"
)

// Limits bound what one mail can make the parser do. A mail over any of
// them is refused whole, by the limit's name, and quarantined: a mail
// bomb (a multipart nested 100,000 deep) costs one linear scan that stops
// at the first limit it breaks.
type Limits struct {
	// MailBytes is the largest mail read (channels.email.maxMailBytes).
	MailBytes int64
	// Depth is the deepest a MIME part may be nested, the mail itself
	// being depth 0 (channels.email.maxMimeDepth).
	Depth int
	// Parts is how many MIME parts a mail may have
	// (channels.email.maxMimeParts).
	Parts int
	// HeaderBytes bounds the mail's header and each part's header
	// (channels.email.maxHeaderBytes).
	HeaderBytes int
}

// Default limits: far above what mail programs write (a few levels, a
// few dozen parts, headers of some kilobytes; Postfix refuses headers
// over 100 KB), far below what makes parsing slow.
const (
	DefaultMaxMailBytes   = 25 << 20
	DefaultMaxMimeDepth   = 16
	DefaultMaxMimeParts   = 256
	DefaultMaxHeaderBytes = 100 << 10
)

// LimitError is a mail refused because it breaks one of the Limits.
type LimitError struct {
	// What was too large, in words.
	What string
	// Key is the setting under channels.email that raises the limit.
	Key   string
	Limit int64
}

// Error names what was too large, the limit and its setting.
func (e *LimitError) Error() string {
	return fmt.Sprintf("%s: over the limit of %d (channels.email.%s)", e.What, e.Limit, e.Key)
}

// entity is one MIME entity of a mail: the mail itself (index 0) or one
// of its parts.
type entity struct {
	header    textproto.MIMEHeader
	mediaType string // lower case; text/plain when the header has none
	params    map[string]string
	parent    int // -1 for the mail
	depth     int
	children  []int
	// body is the entity's body as it is in the mail, not decoded; nil
	// for a multipart (its children hold its content).
	body []byte
}

// isMultipart reports whether e is a multipart whose parts were read.
func (e *entity) isMultipart() bool { return e.children != nil }

// encoding is the entity's Content-Transfer-Encoding, lower case.
func (e *entity) encoding() string {
	return strings.ToLower(strings.TrimSpace(e.header.Get("Content-Transfer-Encoding")))
}

// fileName is the name the entity's file carries (Content-Disposition's
// filename, else Content-Type's name), "" when it is not a file.
func (e *entity) fileName() string {
	if _, ps, err := mime.ParseMediaType(e.header.Get("Content-Disposition")); err == nil && ps["filename"] != "" {
		return ps["filename"]
	}
	return e.params["name"]
}

// ctxCheckLines is how many lines the scanner reads between two looks at
// its context: often enough that a cancelled gateway stops within
// milliseconds, rarely enough to cost nothing.
const ctxCheckLines = 512

// scanMIME splits raw into its MIME entities in one pass over its lines,
// whatever the nesting: each line is compared once with the boundaries
// open at that point (a map), where reading nested parts through nested
// readers (mime/multipart) reads each byte once per level. It stops at
// the first limit broken, or when ctx ends.
func scanMIME(ctx context.Context, raw []byte, lim Limits) ([]entity, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if lim.MailBytes > 0 && int64(len(raw)) > lim.MailBytes {
		return nil, &LimitError{What: fmt.Sprintf("the mail has %d bytes", len(raw)), Key: "maxMailBytes", Limit: lim.MailBytes}
	}
	head, bodyAt, err := readHeader(raw, 0, lim.HeaderBytes, "the mail's header")
	if err != nil {
		return nil, err
	}
	ents := []entity{newEntity(head, -1, 0)}
	type frame struct {
		boundary string
		entity   int
	}
	var stack []frame
	open := map[string]int{} // boundary -> index in stack
	// push opens entity i as a multipart when it is one with a boundary
	// no enclosing multipart uses (a reused boundary would make its
	// delimiters ambiguous: such a part is read as a leaf).
	push := func(i int) bool {
		b := ents[i].params["boundary"]
		if !strings.HasPrefix(ents[i].mediaType, "multipart/") || b == "" || len(b) > 200 {
			return false
		}
		if _, used := open[b]; used {
			return false
		}
		open[b] = len(stack)
		stack = append(stack, frame{b, i})
		ents[i].children = []int{}
		return true
	}
	leaf, leafAt := -1, 0 // the leaf whose body is being read
	endLeaf := func(end int) {
		if leaf < 0 {
			return
		}
		// The line break before a delimiter belongs to the delimiter.
		if end > leafAt && raw[end-1] == '\n' {
			end--
			if end > leafAt && raw[end-1] == '\r' {
				end--
			}
		}
		ents[leaf].body = raw[leafAt:end]
		leaf = -1
	}
	if !push(0) {
		ents[0].body = raw[bodyAt:]
		return ents, nil
	}
	lines := 0
	for pos := bodyAt; pos < len(raw) && len(stack) > 0; {
		next := len(raw)
		if i := bytes.IndexByte(raw[pos:], '\n'); i >= 0 {
			next = pos + i + 1
		}
		if lines++; lines%ctxCheckLines == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		line := raw[pos:next]
		if !bytes.HasPrefix(line, []byte("--")) {
			pos = next
			continue
		}
		d := string(bytes.TrimRight(line[2:], " \t\r\n"))
		k, ok := open[d]
		closing := false
		if !ok && strings.HasSuffix(d, "--") {
			k, ok = open[strings.TrimSuffix(d, "--")]
			closing = ok
		}
		if !ok {
			pos = next
			continue
		}
		endLeaf(pos)
		// A delimiter of an enclosing multipart closes the ones inside
		// it that were never closed.
		for len(stack)-1 > k {
			delete(open, stack[len(stack)-1].boundary)
			stack = stack[:len(stack)-1]
		}
		if closing {
			delete(open, stack[k].boundary)
			stack = stack[:k]
			pos = next // what follows, up to the next delimiter, is an epilogue
			continue
		}
		parent := stack[k].entity
		depth := ents[parent].depth + 1
		if lim.Depth > 0 && depth > lim.Depth {
			return nil, &LimitError{What: "MIME parts nested deeper than allowed", Key: "maxMimeDepth", Limit: int64(lim.Depth)}
		}
		if lim.Parts > 0 && len(ents) >= lim.Parts+1 {
			return nil, &LimitError{What: "more MIME parts than allowed", Key: "maxMimeParts", Limit: int64(lim.Parts)}
		}
		h, at, err := readHeader(raw, next, lim.HeaderBytes, "a MIME part's header")
		if err != nil {
			return nil, err
		}
		ents = append(ents, newEntity(h, parent, depth))
		i := len(ents) - 1
		ents[parent].children = append(ents[parent].children, i)
		if !push(i) {
			leaf, leafAt = i, at
		}
		pos = at
	}
	endLeaf(len(raw))
	return ents, nil
}

func newEntity(h textproto.MIMEHeader, parent, depth int) entity {
	mt, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	switch {
	case h.Get("Content-Type") == "":
		mt, params = "text/plain", map[string]string{}
	case err != nil && mt == "":
		// Unreadable: not text, so nothing is guessed from it.
		mt, params = "application/octet-stream", map[string]string{}
	}
	if params == nil {
		params = map[string]string{}
	}
	return entity{header: h, mediaType: strings.ToLower(mt), params: params, parent: parent, depth: depth}
}

// readHeader reads the header that starts at raw[at:], at most max bytes
// with its blank line, and returns it with where the body starts. A
// header without a blank line runs to the end of raw; a header line that
// cannot be read ends the header (what came before it is kept).
func readHeader(raw []byte, at, max int, what string) (textproto.MIMEHeader, int, error) {
	pos := at
	for pos < len(raw) {
		if max > 0 && pos-at >= max {
			return nil, 0, &LimitError{What: what + " is longer than allowed", Key: "maxHeaderBytes", Limit: int64(max)}
		}
		next := len(raw)
		if i := bytes.IndexByte(raw[pos:], '\n'); i >= 0 {
			next = pos + i + 1
		}
		if max > 0 && next-at > max {
			return nil, 0, &LimitError{What: what + " is longer than allowed", Key: "maxHeaderBytes", Limit: int64(max)}
		}
		if line := raw[pos:next]; len(bytes.TrimRight(line, "\r\n")) == 0 && next > pos {
			h := parseHeader(raw[at:pos])
			return h, next, nil
		}
		pos = next
	}
	return parseHeader(raw[at:]), len(raw), nil
}

func parseHeader(b []byte) textproto.MIMEHeader {
	src := make([]byte, 0, len(b)+4)
	src = append(append(src, b...), "\r\n\r\n"...)
	// A buffer the header's size: bufio's default 4 KB for each of
	// thousands of small part headers would be most of the work.
	h, _ := textproto.NewReader(bufio.NewReaderSize(bytes.NewReader(src), min(len(src), 4096))).ReadMIMEHeader()
	if h == nil {
		h = textproto.MIMEHeader{}
	}
	return h
}
