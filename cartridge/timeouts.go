package cartridge

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Timeouts are the time limits of the provider's requests that a
// cartridge sets under provider.timeouts (an nb extension of the
// specification), each in seconds:
//
//	provider:
//	  timeouts:
//	    connect: 10      # connection, TLS included
//	    first-byte: 120  # from the request to the first byte of the answer
//	    idle: 300        # silence allowed while the answer streams
//
// A zero field was not set: the provider's default applies. The fields
// match provider.Timeouts, so provider.Timeouts(t) converts.
type Timeouts struct {
	Connect   time.Duration
	FirstByte time.Duration
	Idle      time.Duration
}

// timeoutKeys maps the keys of provider.timeouts to their fields.
var timeoutKeys = map[string]func(*Timeouts) *time.Duration{
	"connect":    func(t *Timeouts) *time.Duration { return &t.Connect },
	"first-byte": func(t *Timeouts) *time.Duration { return &t.FirstByte },
	"idle":       func(t *Timeouts) *time.Duration { return &t.Idle },
}

// Timeouts returns provider.timeouts. Each value is a number of seconds
// above 0 (fractions allowed; text holding a number, as an ENV reference
// gives, too); null leaves the limit at its default. Any other value or
// key is an *Error naming the file, the line and the key.
func (c *Cartridge) Timeouts() (Timeouts, error) {
	var t Timeouts
	v, ok := c.Get("provider", "timeouts")
	if !ok || v == nil {
		return t, nil
	}
	fail := func(key, format string, args ...any) error {
		path := "provider.timeouts"
		if key != "" {
			path += "." + key
		}
		return &Error{File: c.Path, Line: c.lineOf(path), Key: path, Msg: fmt.Sprintf(format, args...)}
	}
	m, isMap := v.(map[string]any)
	if !isMap {
		return t, fail("", "must be a mapping of connect, first-byte and idle to seconds, not %s", kind(v))
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		field, known := timeoutKeys[k]
		if !known {
			return t, fail(k, "unknown time limit%s", nearestOrKnown(k, []string{"connect", "first-byte", "idle"}))
		}
		val := m[k]
		if val == nil {
			continue
		}
		secs, ok := seconds(val)
		if !ok || secs <= 0 || math.IsInf(secs, 0) || math.IsNaN(secs) || secs > 7*24*3600 {
			return t, fail(k, "must be a number of seconds above 0 (for example 120), not %v", val)
		}
		*field(&t) = time.Duration(secs * float64(time.Second))
	}
	return t, nil
}

// seconds reads a number of seconds: a YAML number, or text holding one.
func seconds(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(n), 64)
		return f, err == nil
	}
	return 0, false
}
