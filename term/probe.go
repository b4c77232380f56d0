package term

import (
	"bytes"
	"os"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// probeTimeout bounds the wait for a terminal's answer to a cursor
// position query: terminals answer at once, over a slow SSH link in a few
// hundred milliseconds; Emacs shell buffers, expect scripts and some web
// terminals never do.
const probeTimeout = 1500 * time.Millisecond

// ProbeCursor asks the terminal on in/out where its cursor is (the query
// the line editor sends before every prompt) and reports whether it
// answered within timeout. Bytes the user typed meanwhile are returned,
// so nothing typed is lost. The terminal's mode is restored.
func ProbeCursor(in, out *os.File, timeout time.Duration) (answered bool, typed []byte) {
	old, err := term.MakeRaw(int(in.Fd()))
	if err != nil {
		return false, nil
	}
	defer term.Restore(int(in.Fd()), old) //nolint:errcheck // best effort
	if _, err := out.WriteString("\x1b[6n"); err != nil {
		return false, nil
	}
	deadline := time.Now().Add(timeout)
	var buf []byte
	chunk := make([]byte, 256)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return false, buf
		}
		fds := []unix.PollFd{{Fd: int32(in.Fd()), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return false, buf
		}
		m, err := unix.Read(int(in.Fd()), chunk)
		if err != nil || m <= 0 {
			return false, buf
		}
		buf = append(buf, chunk[:m]...)
		if rest, ok := cutCursorReport(buf); ok {
			return true, rest
		}
		if len(buf) > 64<<10 {
			return false, buf
		}
	}
}

// cutCursorReport finds a cursor position report (ESC [ row ; col R) in
// b and returns b without it.
func cutCursorReport(b []byte) ([]byte, bool) {
	for i := 0; i+1 < len(b); i++ {
		if b[i] != 0x1b || b[i+1] != '[' {
			continue
		}
		j := i + 2
		digits, semi := 0, false
		for ; j < len(b); j++ {
			c := b[j]
			switch {
			case c >= '0' && c <= '9':
				digits++
				continue
			case c == ';' && !semi && digits > 0:
				semi = true
				digits = 0
				continue
			case c == 'R' && semi && digits > 0:
				return append(bytes.Clone(b[:i]), b[j+1:]...), true
			}
			break
		}
	}
	return b, false
}
