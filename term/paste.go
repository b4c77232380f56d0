package term

import (
	"bytes"
	"io"
	"strings"
)

// Bracketed paste: the terminal wraps pasted text in ESC[200~ ... ESC[201~
// once the REPL asks for it (ESC[?2004h), so a multi-line paste is one
// message instead of one request per line.
const (
	pasteOn    = "\x1b[?2004h"
	pasteOff   = "\x1b[?2004l"
	pasteStart = "\x1b[200~"
	pasteEnd   = "\x1b[201~"
)

// PastedNewline stands for a line break inside a pasted text while it is
// being edited (the line editor knows only single lines); it is turned
// back into "\n" when the line is sent.
const PastedNewline = '⏎'

// pasteReader passes terminal input through, removing the paste markers
// and turning line breaks inside a paste into PastedNewline.
type pasteReader struct {
	r       io.Reader
	pending []byte // read but not yet handed out (a marker may be split)
	out     []byte
	pasting bool
	eof     error
}

func newPasteReader(r io.Reader) *pasteReader { return &pasteReader{r: r} }

func (p *pasteReader) Read(b []byte) (int, error) {
	for len(p.out) == 0 {
		if p.eof != nil && len(p.pending) == 0 {
			return 0, p.eof
		}
		if p.eof == nil {
			buf := make([]byte, 4096)
			n, err := p.r.Read(buf)
			p.pending = append(p.pending, buf[:n]...)
			if err != nil {
				p.eof = err
			}
		}
		p.process(p.eof != nil)
	}
	n := copy(b, p.out)
	p.out = p.out[n:]
	return n, nil
}

// process moves what can be decided from pending to out; at the end of
// input, an unfinished marker is plain text.
func (p *pasteReader) process(final bool) {
	for len(p.pending) > 0 {
		i := bytes.IndexByte(p.pending, 0x1b)
		if p.pasting {
			// Line breaks inside a paste become PastedNewline ("\r\n" one).
			end := len(p.pending)
			if i >= 0 {
				end = i
			}
			text := string(p.pending[:end])
			text = strings.ReplaceAll(text, "\r\n", "\n")
			text = strings.NewReplacer("\r", string(PastedNewline), "\n", string(PastedNewline)).Replace(text)
			p.out = append(p.out, text...)
			p.pending = p.pending[end:]
		} else {
			if i < 0 {
				p.out = append(p.out, p.pending...)
				p.pending = p.pending[:0]
				return
			}
			p.out = append(p.out, p.pending[:i]...)
			p.pending = p.pending[i:]
		}
		if len(p.pending) == 0 {
			return
		}
		// pending starts with ESC: a marker, a prefix of one, or other input.
		marker := pasteStart
		if p.pasting {
			marker = pasteEnd
		}
		switch {
		case bytes.HasPrefix(p.pending, []byte(marker)):
			p.pending = p.pending[len(marker):]
			p.pasting = !p.pasting
		case !final && bytes.HasPrefix([]byte(marker), p.pending):
			return // wait for the rest of a possible marker
		default:
			p.out = append(p.out, p.pending[0])
			p.pending = p.pending[1:]
		}
	}
}

// Close closes the underlying reader when it can be closed.
func (p *pasteReader) Close() error {
	if c, ok := p.r.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// prefixReader hands out prefix, then reads r.
type prefixReader struct {
	prefix []byte
	r      io.Reader
}

func (p *prefixReader) Read(b []byte) (int, error) {
	if len(p.prefix) > 0 {
		n := copy(b, p.prefix)
		p.prefix = p.prefix[n:]
		return n, nil
	}
	return p.r.Read(b)
}
