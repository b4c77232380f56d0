package cliflag

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/nbots/nb/tracing"
)

// Logger is the one logger of nb's long-running commands: level and
// format as --log-level and --log-format take them, to w (standard error).
// A line logged with a context that holds a span names its trace_id and
// span_id.
func Logger(w io.Writer, level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	if err := CheckLogFormat(format); err != nil {
		return nil, err
	}
	opts := &slog.HandlerOptions{Level: l}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if format == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(tracing.LogHandler(h)), nil
}

// CheckLogFormat fails on a --log-format other than text or json.
func CheckLogFormat(format string) error {
	if format != "text" && format != "json" {
		return fmt.Errorf("--log-format %q: use text or json", format)
	}
	return nil
}

// JSONLines is standard error in --log-format json: what is written to
// it line by line (banners, warnings, errors printed as text) becomes one
// JSON object per line, as the JSON log handler writes them ("msg" the
// line, "level" WARN for a warning, INFO otherwise); lines that are JSON
// objects already (the logger's own) pass unchanged. Writes may come from
// many goroutines. Flush writes a last line left without a newline.
type JSONLines struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte
	log *slog.Logger
}

// NewJSONLines returns the JSONLines writing to w.
func NewJSONLines(w io.Writer) *JSONLines {
	j := &JSONLines{w: w}
	j.log = slog.New(slog.NewJSONHandler(w, nil))
	return j
}

// Write converts each complete line of p.
func (j *JSONLines) Write(p []byte) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.buf = append(j.buf, p...)
	for {
		i := bytes.IndexByte(j.buf, '\n')
		if i < 0 {
			break
		}
		line := j.buf[:i]
		j.emit(line)
		j.buf = j.buf[i+1:]
	}
	if len(j.buf) == 0 {
		j.buf = nil
	}
	return len(p), nil
}

// Flush writes what is left without a newline.
func (j *JSONLines) Flush() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.buf) > 0 {
		j.emit(j.buf)
		j.buf = nil
	}
}

func (j *JSONLines) emit(line []byte) {
	t := bytes.TrimSpace(line)
	if len(t) == 0 {
		return
	}
	if t[0] == '{' && json.Valid(t) {
		j.w.Write(append(line, '\n')) //nolint:errcheck // nowhere to report a broken stderr
		return
	}
	msg := strings.TrimRight(string(line), " \t\r")
	level := slog.LevelInfo
	if strings.Contains(strings.ToLower(msg), "warning:") {
		level = slog.LevelWarn
	}
	j.log.Log(context.Background(), level, msg)
}
