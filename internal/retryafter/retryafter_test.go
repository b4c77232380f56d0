package retryafter

import (
	"math"
	"net/http"
	"testing"
	"time"
)

func TestHeader(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	const def, limit = 3 * time.Second, time.Hour
	date := func(d time.Duration) string { return now.Add(d).Format(http.TimeFormat) }
	tests := map[string]struct {
		h    string
		want time.Duration
	}{
		"empty":                   {"", def},
		"blank":                   {"   ", def},
		"seconds":                 {"120", 2 * time.Minute},
		"seconds, spaced":         {" 7 ", 7 * time.Second},
		"leading zeros":           {"007", 7 * time.Second},
		"zero":                    {"0", def},
		"fractional":              {"1.5", 1500 * time.Millisecond},
		"fraction below a second": {"0.25", 250 * time.Millisecond},
		"negative":                {"-5", def},
		"plus sign":               {"+5", def},
		"exponent":                {"1e3", def},
		"hex float":               {"0x10", def},
		"NaN":                     {"NaN", def},
		"infinity":                {"Inf", def},
		"trailing dot":            {"5.", def},
		"leading dot":             {".5", def},
		"two dots":                {"1.2.3", def},
		"garbage":                 {"soon", def},
		"seconds and text":        {"5 seconds", def},
		"over the cap":            {"7200", limit},
		"huge":                    {"99999999999999999999999999", limit},
		"date in the future":      {date(90 * time.Second), 90 * time.Second},
		"date now":                {date(0), def},
		"date in the past":        {date(-time.Hour), def},
		"date past the cap":       {date(48 * time.Hour), limit},
		"RFC 850 date":            {now.Add(time.Minute).Format(time.RFC850), time.Minute},
		"asctime date":            {now.Add(time.Minute).Format(time.ANSIC), time.Minute},
		"date not in GMT":         {"Mon, 30 Nov 2026 12:01:00 +0100", def},
	}
	for name, tt := range tests {
		if got := Header(tt.h, now, def, limit); got != tt.want {
			t.Errorf("%s: Header(%q) = %v, want %v", name, tt.h, got, tt.want)
		}
	}
	long := "1"
	for range 400 {
		long += "9"
	}
	if got := Header(long, now, def, limit); got != limit {
		t.Errorf("400 digits: %v, want the cap %v", got, limit)
	}
	if got := Header(long, now, def, 0); got != time.Duration(math.MaxInt64) {
		t.Errorf("400 digits without a cap: %v, want the longest Duration", got)
	}
	if got := Header("99999999999", now, def, 0); got <= 0 {
		t.Errorf("a count that overflows nanoseconds without a cap: %v, want positive", got)
	}
}

func TestSeconds(t *testing.T) {
	const def, limit = time.Second, 10 * time.Minute
	tests := []struct {
		s    float64
		want time.Duration
	}{
		{0.4, 400 * time.Millisecond},
		{1.5, 1500 * time.Millisecond},
		{60, time.Minute},
		{0, def},
		{-1, def},
		{math.NaN(), def},
		{math.Inf(-1), def},
		{math.Inf(1), limit},
		{1e300, limit},
		{601, limit},
		{1e-12, def}, // rounds to no wait at all
	}
	for _, tt := range tests {
		if got := Seconds(tt.s, def, limit); got != tt.want {
			t.Errorf("Seconds(%v) = %v, want %v", tt.s, got, tt.want)
		}
	}
}
