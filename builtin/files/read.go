package files

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/nbots/nb/builtin/internal/arg"
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
	return tool.Spec{
		Name: "read_file",
		Description: "Read a text file of the workspace. Lines come numbered as \"N| text\" (the number and \"| \" are not part of the file). " +
			fmt.Sprintf("At most %d lines per call: use offset and limit to read a long file in parts. Binary files are refused.", ReadLines),
		Parameters: map[string]any{
			"type": "object",
			"properties": map[string]any{
				"path":   map[string]any{"type": "string", "description": "The file's path, relative to the workspace."},
				"offset": map[string]any{"type": "integer", "minimum": 1, "description": "The first line to read (1-based; default 1)."},
				"limit":  map[string]any{"type": "integer", "minimum": 1, "maximum": ReadLines, "description": fmt.Sprintf("How many lines to read (default and most %d).", ReadLines)},
			},
			"required": []any{"path"},
		},
	}
}

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
	f, err := t.w.openRegular(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readLines(f, p, offset, limit)
}

// openRegular opens a regular file of the workspace for reading. The open
// does not block on a FIFO; folders and devices are refused.
func (w *Workspace) openRegular(p string) (*os.File, error) {
	name, err := w.rel(p)
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
	return f, nil
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

	var lines []string
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
		line, cut, err := readLine(br)
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
		if n := utf8.RuneCountInString(text); n > readLineChars || cut > 0 {
			kept := text[:runeOffset(text, readLineChars)]
			more := len(line) - len(kept) + cut
			text = kept + fmt.Sprintf(" … [this line goes on for %d more bytes]", more)
		}
		lines = append(lines, fmt.Sprintf("%d| %s", total, text))
	}

	if total == 0 {
		return fmt.Sprintf("(Empty file: %s)", name), nil
	}
	if offset > total {
		return "", fmt.Errorf("offset %d is beyond the end of %s, which has %d lines", offset, name, total)
	}
	shownLast := offset + len(lines) - 1
	body := fitBudget(lines, offset)
	if shownLast < total {
		return fmt.Sprintf("%s\n(Showing lines %d-%d of %d. Use offset=%d to continue.)", body, offset, shownLast, total, shownLast+1), nil
	}
	return fmt.Sprintf("%s\n(End of file: %d lines.)", body, total), nil
}

// fitBudget joins numbered lines; when they exceed the budget, it keeps
// the first and the last lines within half the budget each and says which
// lines were left out and how to read them.
func fitBudget(lines []string, offset int) string {
	size := 0
	for _, l := range lines {
		size += len(l) + 1
	}
	if size <= readBudget {
		return strings.Join(lines, "\n")
	}
	half := readBudget / 2
	head, used := 0, 0
	for head < len(lines) && used+len(lines[head])+1 <= half {
		used += len(lines[head]) + 1
		head++
	}
	tail, used := 0, 0
	for tail < len(lines)-head && used+len(lines[len(lines)-1-tail])+1 <= half {
		used += len(lines[len(lines)-1-tail]) + 1
		tail++
	}
	from, to := offset+head, offset+len(lines)-tail-1
	left := 0
	for _, l := range lines[head : len(lines)-tail] {
		left += utf8.RuneCountInString(l) + 1
	}
	note := fmt.Sprintf("[... lines %d-%d left out (%d characters) to keep this answer short: read them with offset=%d and a smaller limit ...]", from, to, left, from)
	parts := append(append(append([]string{}, lines[:head]...), note), lines[len(lines)-tail:]...)
	return strings.Join(parts, "\n")
}

// readLine reads one line without its newline. A line longer than the
// reader's buffer is kept up to the buffer's size; cut counts the bytes
// left out. io.EOF comes only when nothing was read.
func readLine(br *bufio.Reader) (line []byte, cut int, err error) {
	s, err := br.ReadSlice('\n')
	switch {
	case err == nil:
		return bytes.Clone(s[:len(s)-1]), 0, nil
	case errors.Is(err, bufio.ErrBufferFull):
		line = bytes.Clone(s)
		for {
			s, err = br.ReadSlice('\n')
			if err == nil {
				return line, cut + len(s) - 1, nil
			}
			cut += len(s)
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if err == io.EOF {
				return line, cut, nil
			}
			return nil, 0, err
		}
	case err == io.EOF:
		if len(s) == 0 {
			return nil, 0, io.EOF
		}
		return bytes.Clone(s), 0, nil
	}
	return nil, 0, err
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
