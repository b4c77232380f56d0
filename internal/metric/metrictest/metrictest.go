// Package metrictest reads what GET /metrics answers, for tests: every
// sample by its series, so a test compares two scrapes.
package metrictest

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/nbots/nb/internal/metric"
)

// Scrape is one reading of /metrics: series (name{labels} as written)
// to value, and the # TYPE of each family.
type Scrape struct {
	Values map[string]float64
	Types  map[string]string
	Help   map[string]string
	Text   string
}

// Read is a reading of this process's metrics (metric.Write), as GET
// /metrics answers them.
func Read(t testing.TB) Scrape {
	var b strings.Builder
	metric.Write(&b)
	return Parse(t, b.String())
}

// Parse reads the Prometheus text format.
func Parse(t testing.TB, text string) Scrape {
	t.Helper()
	s := Scrape{Values: map[string]float64{}, Types: map[string]string{}, Help: map[string]string{}, Text: text}
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
		case strings.HasPrefix(line, "# TYPE "):
			f := strings.Fields(line)
			if len(f) != 4 {
				t.Fatalf("bad TYPE line %q", line)
			}
			s.Types[f[2]] = f[3]
		case strings.HasPrefix(line, "# HELP "):
			name, help, _ := strings.Cut(strings.TrimPrefix(line, "# HELP "), " ")
			s.Help[name] = help
		case strings.HasPrefix(line, "#"):
		default:
			i := strings.LastIndexByte(line, ' ')
			if i < 0 {
				t.Fatalf("bad sample line %q", line)
			}
			v, err := strconv.ParseFloat(line[i+1:], 64)
			if err != nil {
				t.Fatalf("bad value in %q: %v", line, err)
			}
			s.Values[line[:i]] = v
		}
	}
	return s
}

// Get scrapes url with the headers given as name, value pairs.
func Get(t testing.TB, url string, header ...string) Scrape {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("GET %s: Content-Type %q", url, ct)
	}
	return Parse(t, string(b))
}

// Delta is after's value of series minus before's (absent is 0).
func Delta(before, after Scrape, series string) float64 {
	return after.Values[series] - before.Values[series]
}

// Sum is the sum of the values of the series whose text contains every
// one of parts.
func (s Scrape) Sum(parts ...string) float64 {
	total := 0.0
next:
	for k, v := range s.Values {
		for _, p := range parts {
			if !strings.Contains(k, p) {
				continue next
			}
		}
		total += v
	}
	return total
}
