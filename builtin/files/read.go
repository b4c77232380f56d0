package files

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unicode/utf8"

	"github.com/nbots/nb/builtin/environment"
	"github.com/nbots/nb/builtin/internal/arg"
	"github.com/nbots/nb/media"
	"github.com/nbots/nb/tool"
)

const (
	// ReadLines is how many lines read_file returns when the call sets
	// no limit, and the most it returns.
	ReadLines = 2000
	// readLineChars bounds one line of read_file's answer; the rest of a
	// longer line (minified code, data) is left out with a note.
	readLineChars = 2000
	// readBudget bounds the lines of one answer, in characters, so the
	// answer fits the model's 50,000 with its notes; past it the middle
	// lines are left out and the answer says which.
	readBudget = 48_000
	// sniffBytes is how much of a file is examined to tell text from binary.
	sniffBytes = 8192
)

// ReadFile returns the read_file tool.
func ReadFile(w *Workspace) tool.Tool { return &readFile{w: w} }

type readFile struct{ w *Workspace }

func (t *readFile) Spec() tool.Spec {
	binary := "Binary files are refused."
	if t.w.images {
		binary = fmt.Sprintf("A PNG, JPEG, GIF or WebP picture (up to %d MB) comes as an image; other binary files are refused.", media.MaxImageBytes>>20)
	}
	return tool.Spec{
		Name: "read_file",
		Description: "Read a text file of the workspace. Lines come numbered as \"N| text\" (the number and \"| \" are not part of the file). " +
			fmt.Sprintf("At most %d lines per call: use offset and limit to read a long file in parts. ", ReadLines) + binary,
		Parameters: readFileParams(),
	}
}

// readFileParams is read_file's schema, built once on first use: a spec's Parameters are read-only
// (tool.Spec), and a turn asks every tool for its spec.
var readFileParams = sync.OnceValue(func() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"path":   map[string]any{"type": "string", "description": "The file's path, relative to the workspace."},
			"offset": map[string]any{"type": "integer", "minimum": 1, "description": "The first line to read (1-based; default 1)."},
			"limit":  map[string]any{"type": "integer", "minimum": 1, "maximum": ReadLines, "description": fmt.Sprintf("How many lines to read (default and most %d).", ReadLines)},
		},
		"required": []any{"path"},
	}
})

func (t *readFile) ReadOnly() bool { return true }

// OutputLimits: the attractor's 50,000 characters; no line limit beyond
// the tool's own (its answer is at most ReadLines lines and a few notes).
func (t *readFile) OutputLimits() tool.Limits {
	return tool.Limits{Chars: 50_000, Lines: ReadLines + 10}
}

func (t *readFile) Run(ctx context.Context, call tool.Call) (any, error) {
	p, err := arg.String(call.Arguments, "path", true)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(p) == "" {
		return nil, errors.New("the argument path is empty: give the file's path, relative to the workspace")
	}
	offset, err := arg.Int(call.Arguments, "offset", 1, 1, math.MaxInt32)
	if err != nil {
		return nil, err
	}
	limit, err := arg.Int(call.Arguments, "limit", ReadLines, 1, math.MaxInt32)
	if err != nil {
		return nil, err
	}
	limit = min(limit, ReadLines)
	f, err := t.w.in(ctx).openRegular(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if w := t.w.in(ctx); w.images {
		if img, ok, err := readImage(f, p); ok || err != nil {
			return img, err
		}
	}
	return readLines(f, p, offset, limit)
}

// readImage answers f as an image when its content is a PNG, JPEG, GIF
// or WebP picture (by its bytes, not its name), within
// media.MaxImageBytes. ok is false for any other file, which is then
// read from its start as text.
func readImage(f environment.File, name string) (*tool.Result, bool, error) {
	head := make([]byte, media.SniffLen)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, false, fmt.Errorf("%s: %v", name, unwrap(err))
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, false, fmt.Errorf("%s: %v", name, unwrap(err))
	}
	kind, ok := media.ImageType(head[:n])
	if !ok {
		return nil, false, nil
	}
	data, err := io.ReadAll(io.LimitReader(f, media.MaxImageBytes+1))
	if err != nil {
		return nil, true, fmt.Errorf("%s: %v", name, unwrap(err))
	}
	if len(data) > media.MaxImageBytes {
		return nil, true, fmt.Errorf("%s is a picture (%s) larger than the %d MB a picture may have for the model", name, kind, media.MaxImageBytes>>20)
	}
	return &tool.Result{Text: fmt.Sprintf("%s is a picture (%s, %d bytes): it follows as an image.", name, kind, len(data)),
		Images: []media.Image{{MediaType: kind, Data: data}}}, true, nil
}

// openRegular opens a regular file of the workspace for reading. The open
// does not block on a FIFO; folders and devices are refused.
func (w *Workspace) openRegular(p string) (environment.File, error) {
	name, err := w.path(p, false)
	if err != nil {
		return nil, err
	}
	f, err := w.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, w.pathError(p, err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, w.pathError(p, err)
	}
	if info.IsDir() {
		f.Close()
		return nil, fmt.Errorf("%s is a folder, not a file: list_dir or glob show what it holds", p)
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file (%s)", p, info.Mode().Type())
	}
	if err := w.checkLinks(p, info); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// checkLinks refuses a regular file with more than one hard link, unless
// the cartridge allows them: another name of the file may lie outside the
// workspace, and os.Root cannot see that.
func (w *Workspace) checkLinks(p string, info fs.FileInfo) error {
	if w.hardLinks {
		return nil
	}
	if n := linkCount(info); n > 1 {
		return fmt.Errorf("%s has %d hard links: another of its names may be outside the workspace, so the file tools do not read it (the cartridge may allow it with builtins.files.hard-links: true)", p, n)
	}
	return nil
}

// looksBinary reports whether the start of a file is not UTF-8 text: it
// holds a NUL byte or an invalid UTF-8 sequence (a sequence cut by the end
// of the sample does not count).
func looksBinary(sample []byte, complete bool) bool {
	if bytes.IndexByte(sample, 0) >= 0 {
		return true
	}
	if utf8.Valid(sample) {
		return false
	}
	if !complete {
		for k := 1; k <= 3 && k < len(sample); k++ {
			if utf8.Valid(sample[:len(sample)-k]) {
				return false
			}
		}
	}
	return true
}

// readLines formats lines [offset, offset+limit) of r, numbered, within
// the character budget, with a footer that says where the file goes on.
func readLines(r io.Reader, name string, offset, limit int) (string, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	sample, err := br.Peek(sniffBytes)
	if err != nil && err != io.EOF && !errors.Is(err, bufio.ErrBufferFull) {
		return "", fmt.Errorf("%s: %v", name, unwrap(err))
	}
	if looksBinary(sample, len(sample) < sniffBytes) {
		return "", fmt.Errorf("%s is a binary file (not UTF-8 text): read_file only reads text; exec with a tool made for the format (file, hexdump -C | head, unzip -l...) can inspect it", name)
	}

	var ans answer
	total := 0 // lines seen so far
	last := offset + limit - 1
	for {
		if total >= last {
			// The answer is complete: count the rest without keeping it.
			n, partial, err := countLines(br)
			if err != nil {
				return "", fmt.Errorf("%s: %v", name, err)
			}
			total += n
			if partial {
				total++
			}
			break
		}
		line, cut, err := readLine(br, readLineChars)
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("%s: %v", name, err)
		}
		total++
		if total < offset {
			continue
		}
		text := strings.ToValidUTF8(strings.TrimSuffix(string(line), "\r"), "\uFFFD")
		if cut > 0 {
			text += fmt.Sprintf(" … [this line goes on for %d more bytes]", cut)
		}
		ans.add(total, text)
	}

	if total == 0 {
		return fmt.Sprintf("(Empty file: %s)", name), nil
	}
	if offset > total {
		return "", fmt.Errorf("offset %d is beyond the end of %s, which has %d lines", offset, name, total)
	}
	shownLast := ans.last
	if shownLast < total {
		return fmt.Sprintf("%s\n(Showing lines %d-%d of %d. Use offset=%d to continue.)", ans.String(), offset, shownLast, total, shownLast+1), nil
	}
	return fmt.Sprintf("%s\n(End of file: %d lines.)", ans.String(), total), nil
}

// answer collects numbered lines within readBudget: the first ones up to
// half of it, then the last ones in what remains. The lines that fall
// between are only counted, and the answer says which they were and how
// to read them: a long file costs read_file the budget, not its size.
type answer struct {
	head, tail         []string
	headSize, tailSize int
	headFull           bool
	leftFrom, leftTo   int // line numbers left out (0: none)
	last               int // the last line number added
}

func (a *answer) add(n int, text string) {
	line := strconv.Itoa(n) + "| " + text
	a.last = n
	size := len(line) + 1
	if !a.headFull {
		if a.headSize+size <= readBudget/2 {
			a.head = append(a.head, line)
			a.headSize += size
			return
		}
		a.headFull = true
	}
	a.tail = append(a.tail, line)
	a.tailSize += size
	for a.tailSize > readBudget-a.headSize && len(a.tail) > 0 {
		// The oldest line of the tail falls into the gap.
		dropped := n - len(a.tail) + 1
		if a.leftFrom == 0 {
			a.leftFrom = dropped
		}
		a.leftTo = dropped
		a.tailSize -= len(a.tail[0]) + 1
		a.tail = a.tail[1:]
	}
	if cap(a.tail) > 4*len(a.tail)+64 {
		a.tail = append([]string(nil), a.tail...) // let the dropped lines go
	}
}

func (a *answer) String() string {
	parts := a.head
	if a.leftFrom > 0 {
		parts = append(parts, fmt.Sprintf("[... lines %d-%d left out to keep this answer short: read them with offset=%d and a smaller limit ...]", a.leftFrom, a.leftTo, a.leftFrom))
	}
	return strings.Join(append(parts, a.tail...), "\n")
}

// readLine reads one line without its newline, keeping at most keep
// characters of it; cut counts the bytes left out. io.EOF comes only when
// nothing was read.
func readLine(br *bufio.Reader, keep int) (line []byte, cut int, err error) {
	kept := 0 // characters kept
	for {
		s, err := br.ReadSlice('\n')
		end := len(s)
		if err == nil {
			end-- // the newline
		}
		k, n := prefix(s[:end], keep-kept)
		line = append(line, s[:k]...)
		kept += n
		cut += end - k
		switch {
		case err == nil:
			return line, cut, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF:
			if len(line) == 0 && cut == 0 && len(s) == 0 {
				return nil, 0, io.EOF
			}
			return line, cut, nil
		default:
			return nil, 0, err
		}
	}
}

// prefix returns the length in bytes of the first n characters of b (an
// invalid byte counts as one) and how many characters that is.
func prefix(b []byte, n int) (size, chars int) {
	for size < len(b) && chars < n {
		if b[size] < utf8.RuneSelf {
			size++
		} else {
			_, w := utf8.DecodeRune(b[size:])
			size += w
		}
		chars++
	}
	return size, chars
}

// countLines counts the newlines left in br; partial reports a last line
// without one.
func countLines(br *bufio.Reader) (n int, partial bool, err error) {
	buf := make([]byte, 64<<10)
	var lastByte byte = '\n'
	for {
		k, err := br.Read(buf)
		if k > 0 {
			n += bytes.Count(buf[:k], []byte{'\n'})
			lastByte = buf[k-1]
		}
		if err == io.EOF {
			return n, lastByte != '\n', nil
		}
		if err != nil {
			return 0, false, err
		}
	}
}

// runeOffset is the byte offset of the n-th rune of s (len(s) past the end).
func runeOffset(s string, n int) int {
	for i := range s {
		if n == 0 {
			return i
		}
		n--
	}
	return len(s)
}
