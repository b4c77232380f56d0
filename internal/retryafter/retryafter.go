// Package retryafter reads the wait a server asks for before the next
// request: the Retry-After header of RFC 9110 §10.2.3, which is either
// delay-seconds (a count of seconds) or an HTTP-date, and the seconds some
// platforms put in their error bodies instead. Every reading is capped by
// the caller, so a broken or hostile server cannot park a sender for
// years, and falls back to the caller's default when it asks for nothing
// usable.
package retryafter

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header returns the wait the Retry-After value h asks for, read at now:
// delay-seconds (digits; a fraction such as "1.5", which some servers
// send, is taken too), or an HTTP-date in any of the three forms RFC 9110
// §5.6.7 makes recipients accept, as its distance from now. The wait is at
// most limit (when limit > 0). It is def when h asks for no wait: empty,
// neither form (a sign, an exponent, "NaN", text), zero, or a date that is
// not after now.
func Header(h string, now time.Time, def, limit time.Duration) time.Duration {
	h = strings.TrimSpace(h)
	if h == "" {
		return def
	}
	if delaySeconds(h) {
		s, err := strconv.ParseFloat(h, 64)
		if err != nil { // only a value too large to represent
			s = math.Inf(1)
		}
		return Seconds(s, def, limit)
	}
	t, err := http.ParseTime(h)
	if err != nil || !t.After(now) {
		return def
	}
	return capped(t.Sub(now), def, limit)
}

// Seconds returns a wait given in seconds (a platform's retry_after body
// field, or milliseconds divided by 1000), at most limit (when limit > 0);
// def when s is not a positive number.
func Seconds(s float64, def, limit time.Duration) time.Duration {
	if math.IsNaN(s) || s <= 0 {
		return def
	}
	// Compared as floats: converting a huge count to a Duration would
	// overflow before any cap could apply.
	if limit > 0 && s >= limit.Seconds() {
		return limit
	}
	if s >= float64(math.MaxInt64)/float64(time.Second) {
		return time.Duration(math.MaxInt64)
	}
	return capped(time.Duration(s*float64(time.Second)), def, limit)
}

func capped(d, def, limit time.Duration) time.Duration {
	switch {
	case d <= 0:
		return def
	case limit > 0 && d > limit:
		return limit
	}
	return d
}

// delaySeconds reports whether h is 1*DIGIT, or digits with one '.' and
// more digits after it.
func delaySeconds(h string) bool {
	whole, frac, dot := strings.Cut(h, ".")
	return digits(whole) && (!dot || digits(frac))
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
