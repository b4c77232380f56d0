// Package metric is nb's Prometheus metrics: one process-wide registry
// (registry.go; the Go runtime's and the process's series in
// runtime.go and process_linux.go), the hooks that nb's choke points call
// (an HTTP request answered, a provider call, a tool call, a run
// admitted or refused, a gateway turn, a message received or delivered),
// and GET /metrics in the Prometheus text exposition format, with
// # HELP and # TYPE lines and histograms in le buckets.
//
// Every label value goes through Label: a value is kept only when it is
// made of the characters of an identifier and its kind has not yet seen
// MaxValues distinct values; anything else is "other". Call sites never
// pass what a client wrote (a URL path, a model a request names, a chat,
// a user): routes are the mux's patterns, and a client's cartridge is
// "client".
//
// The package also keeps what the control page (package
// internal/control) shows beside the metrics: the runs in flight, the
// last errors, per-minute request counts and latencies for the last
// hour, and tokens per day.
package metric

import (
	"io"
	"math"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// MaxValues is the most distinct values a label kind keeps; later ones
// are "other".
const MaxValues = 100

// Other is the value of a label whose value is unknown or past MaxValues.
const Other = "other"

var (
	familiesMu sync.Mutex
	families   = map[string]string{} // name -> help

	labelsMu sync.Mutex
	labels   = map[string]map[string]bool{} // kind -> values kept
)

// Label bounds a label value of kind (cartridge, provider, model, tool,
// channel, source, ...): "" is "none"; a value with characters other than
// letters, digits and _ . : / @ + -, longer than 100 bytes, or new to a
// kind that has MaxValues already, is Other.
func Label(kind, v string) string {
	if v == "" {
		return "none"
	}
	if len(v) > 100 {
		return Other
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_.:/@+-", c) >= 0) {
			return Other
		}
	}
	return keep(kind, v)
}

// keep is v while kind has seen fewer than MaxValues distinct values (or
// v among them), Other after: the bound Label and the route label share.
func keep(kind, v string) string {
	labelsMu.Lock()
	defer labelsMu.Unlock()
	seen := labels[kind]
	if seen == nil {
		seen = map[string]bool{}
		labels[kind] = seen
	}
	if seen[v] {
		return v
	}
	if len(seen) >= MaxValues {
		return Other
	}
	seen[v] = true
	return v
}

// describe records a family's help text.
func describe(name, help string) {
	familiesMu.Lock()
	families[name] = help
	familiesMu.Unlock()
}

// series is name{k="v",...} from pairs of label names and values, which
// callers have bounded already.
func series(name string, kv ...string) string {
	if len(kv) == 0 {
		return name
	}
	var b strings.Builder
	b.Grow(len(name) + 16*len(kv))
	b.WriteString(name)
	b.WriteByte('{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(kv[i])
		b.WriteString(`="`)
		b.WriteString(kv[i+1])
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

// Counter is a counter family.
type Counter struct{ name string }

// NewCounter declares a counter family (its name ends in _total).
func NewCounter(name, help string) Counter {
	describe(name, help)
	return Counter{name}
}

// Add adds n to the series of the label pairs kv.
func (c Counter) Add(n int, kv ...string) {
	if n < 0 {
		return
	}
	if v, ok := lookup(series(c.name, kv...), c.name, newCounter).(*counter); ok && n > 0 {
		v.n.Add(uint64(n)) // n == 0: the series exists at 0
	}
}

// Inc adds one.
func (c Counter) Inc(kv ...string) { c.Add(1, kv...) }

// Gauge is a gauge family.
type Gauge struct{ name string }

// NewGauge declares a gauge family.
func NewGauge(name, help string) Gauge {
	describe(name, help)
	return Gauge{name}
}

// Set sets the series of kv to v.
func (g Gauge) Set(v float64, kv ...string) {
	if s, ok := lookup(series(g.name, kv...), g.name, newGauge).(*gauge); ok {
		s.bits.Store(math.Float64bits(v))
	}
}

// Add adds d to the series of kv.
func (g Gauge) Add(d float64, kv ...string) {
	s, ok := lookup(series(g.name, kv...), g.name, newGauge).(*gauge)
	if !ok {
		return
	}
	for {
		old := s.bits.Load()
		if s.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

// Func makes the series of kv read f at each scrape, in place of the
// function given before (a server made again in the same process, as
// tests and nb gateway's /restart do).
func (g Gauge) Func(f func() float64, kv ...string) {
	if s, ok := lookup(series(g.name, kv...), g.name, newGauge).(*gauge); ok {
		s.f.Store(&f)
	}
}

// scrapes counts the calls of Write: perScrape's cache is good for one.
var scrapes atomic.Uint64

// perScrape returns a reader of f that calls f once per scrape and
// answers the gauges that scrape reads after with the same value: the
// gauges of one reading (a queue's total and its deepest destination)
// cost one call and agree with each other.
func perScrape[T any](f func() T) func() T {
	var (
		mu   sync.Mutex
		at   uint64
		read bool
		v    T
	)
	return func() T {
		mu.Lock()
		defer mu.Unlock()
		if n := scrapes.Load(); !read || at != n {
			v, at, read = f(), n, true
		}
		return v
	}
}

// Histogram is a histogram family with fixed le buckets.
type Histogram struct {
	name    string
	buckets []float64
}

// NewHistogram declares a histogram family with the buckets' upper
// bounds, in increasing order (a last +Inf is implied, and dropped if
// given).
func NewHistogram(name, help string, buckets ...float64) Histogram {
	describe(name, help)
	if n := len(buckets); n > 0 && math.IsInf(buckets[n-1], 1) {
		buckets = buckets[:n-1]
	}
	return Histogram{name, buckets}
}

// Observe adds v to the series of kv; a negative v or NaN is not
// counted.
func (h Histogram) Observe(v float64, kv ...string) {
	if math.IsNaN(v) || v < 0 {
		return
	}
	s, ok := lookup(series(h.name, kv...), h.name, func() value { return newHistogram(h.buckets) }).(*histogram)
	if ok {
		s.observe(v)
	}
}

// Write writes every metric, nb's and the Go runtime's and the
// process's, in the Prometheus text exposition format (version 0.0.4).
func Write(w io.Writer) {
	scrapes.Add(1)
	b := make([]byte, 0, 32<<10)
	b = appendSeries(b)
	b = appendGo(b)
	b = appendProcess(b)
	w.Write(b)
}

// meta appends a family's # HELP and # TYPE lines.
func meta(b []byte, family, typ string) []byte {
	familiesMu.Lock()
	help := helpOf(family)
	familiesMu.Unlock()
	b = append(b, "# HELP "...)
	b = append(b, family...)
	b = append(b, ' ')
	b = append(b, help...)
	b = append(b, "\n# TYPE "...)
	b = append(b, family...)
	b = append(b, ' ')
	b = append(b, typ...)
	return append(b, '\n')
}

// helpOf is the help of a family: nb's own, or a generic one for the
// runtime's and the process's.
func helpOf(name string) string {
	if h, ok := families[name]; ok {
		return h
	}
	switch {
	case strings.HasPrefix(name, "go_"):
		return "Go runtime metric (runtime/metrics, runtime.MemStats)."
	case strings.HasPrefix(name, "process_"):
		return "Process metric (read from /proc)."
	}
	return "nb metric."
}

// ContentType is the exposition format's media type.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// Handler answers GET /metrics; the server it is mounted on applies its
// token and browser rules.
func Handler() http.Handler {
	processStart()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", ContentType)
		w.Header().Set("Cache-Control", "no-store")
		Write(w)
	})
}

// Names lists the families nb declares, sorted (for the docs' test).
func Names() []string {
	familiesMu.Lock()
	defer familiesMu.Unlock()
	out := make([]string, 0, len(families))
	for n := range families {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
