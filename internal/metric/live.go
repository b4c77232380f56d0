package metric

import (
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// What the control page reads besides the metrics: kept in memory, lost
// at a restart.

// latencyBounds are the per-minute latency buckets' upper bounds (ms),
// from which percentiles are read.
var latencyBounds = func() []float64 {
	var b []float64
	for v := 1.0; v < 600000; v *= 1.25 {
		b = append(b, v)
	}
	return b
}()

type minute struct {
	at     int64 // unix minute
	count  int
	errors int
	hist   []int
}

type minuteRing struct {
	mu   sync.Mutex
	ring [60]minute
}

var minutes = &minuteRing{}

func (m *minuteRing) add(now time.Time, d time.Duration, failed bool) {
	at := now.Unix() / 60
	ms := float64(d) / float64(time.Millisecond)
	i := sort.SearchFloat64s(latencyBounds, ms)
	m.mu.Lock()
	defer m.mu.Unlock()
	b := &m.ring[at%60]
	if b.at != at {
		*b = minute{at: at, hist: make([]int, len(latencyBounds)+1)}
	}
	b.count++
	if failed {
		b.errors++
	}
	b.hist[i]++
}

// Minute is one minute of requests.
type Minute struct {
	// Start is the minute's start.
	Start time.Time `json:"start"`
	// Requests and Errors (5xx) answered in it.
	Requests int `json:"requests"`
	Errors   int `json:"errors"`
	// P50, P95 and P99 are latency percentiles in milliseconds (the upper
	// bound of the bucket they fall in); 0 without requests.
	P50 float64 `json:"p50_ms"`
	P95 float64 `json:"p95_ms"`
	P99 float64 `json:"p99_ms"`
}

// LastHour is the 60 minutes up to now's, oldest first.
func LastHour(now time.Time) []Minute {
	cur := now.Unix() / 60
	out := make([]Minute, 60)
	minutes.mu.Lock()
	defer minutes.mu.Unlock()
	for k := range 60 {
		at := cur - 59 + int64(k)
		m := Minute{Start: time.Unix(at*60, 0).UTC()}
		if b := minutes.ring[at%60]; b.at == at {
			m.Requests, m.Errors = b.count, b.errors
			m.P50, m.P95, m.P99 = quantile(b.hist, b.count, .5), quantile(b.hist, b.count, .95), quantile(b.hist, b.count, .99)
		}
		out[k] = m
	}
	return out
}

func quantile(hist []int, n int, q float64) float64 {
	if n == 0 {
		return 0
	}
	want := int(math.Ceil(q * float64(n)))
	seen := 0
	for i, c := range hist {
		seen += c
		if seen >= want {
			if i < len(latencyBounds) {
				return math.Round(latencyBounds[i]*10) / 10
			}
			return latencyBounds[len(latencyBounds)-1]
		}
	}
	return 0
}

// DayTokens is one day's tokens of one model or source.
type DayTokens struct {
	Day    string `json:"day"` // YYYY-MM-DD, UTC
	Key    string `json:"key"`
	Input  int    `json:"input"`
	Output int    `json:"output"`
}

type dayKey struct{ day, key string }

type dayBook struct {
	mu   sync.Mutex
	used map[dayKey][2]int
}

var days = &dayBook{used: map[dayKey][2]int{}}

// source is the process's source of model calls for TokensBySource
// (nb serve's "serve"); "" leaves them out.
var source atomic.Value

// SetSource names the source of the process's model calls.
func SetSource(s string) { source.Store(s) }

func (b *dayBook) add(now time.Time, model string, in, out int) {
	if in == 0 && out == 0 {
		return
	}
	day := now.UTC().Format(time.DateOnly)
	b.mu.Lock()
	defer b.mu.Unlock()
	k := dayKey{day, "model:" + model}
	v := b.used[k]
	b.used[k] = [2]int{v[0] + in, v[1] + out}
	if s, _ := source.Load().(string); s != "" {
		k := dayKey{day, "source:" + s}
		v := b.used[k]
		b.used[k] = [2]int{v[0] + in, v[1] + out}
	}
	// Forget what is older than 31 days.
	if len(b.used) > 1000 {
		limit := now.UTC().AddDate(0, 0, -31).Format(time.DateOnly)
		for k := range b.used {
			if k.day < limit {
				delete(b.used, k)
			}
		}
	}
}

// TokensPerDay are the tokens per day since the process started, by model
// ("model") or by source ("source"), sorted by day then key.
func TokensPerDay(by string) []DayTokens {
	days.mu.Lock()
	defer days.mu.Unlock()
	var out []DayTokens
	for k, v := range days.used {
		if key, ok := strings.CutPrefix(k.key, by+":"); ok {
			out = append(out, DayTokens{Day: k.day, Key: key, Input: v[0], Output: v[1]})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Day != out[j].Day {
			return out[i].Day < out[j].Day
		}
		return out[i].Key < out[j].Key
	})
	return out
}

// Run is a run or turn in flight.
type Run struct {
	// Kind is "run" (nb serve) or "turn" (the gateway).
	Kind string `json:"kind"`
	// What is its bounded label (cartridge, channel/source).
	What    string    `json:"what"`
	Started time.Time `json:"started"`
	// Seconds is how long it has run.
	Seconds float64 `json:"seconds"`

	label func() string
}

var (
	runsMu sync.Mutex
	runs   = map[*Run]bool{}
)

// StartRun records a run in flight until the function it returns is
// called (with the run's error, recorded among the last errors).
func StartRun(kind, what string) func(err error) {
	return StartRunFunc(kind, func() string { return what })
}

// StartRunFunc is StartRun for a run whose label is known later than
// its start (nb serve admits a run before it reads which cartridge it
// is for): what is read at each InFlight and at the end.
func StartRunFunc(kind string, what func() string) func(err error) {
	r := &Run{Kind: kind, Started: time.Now(), label: what}
	runsMu.Lock()
	runs[r] = true
	runsMu.Unlock()
	var once sync.Once
	return func(err error) {
		once.Do(func() {
			runsMu.Lock()
			delete(runs, r)
			runsMu.Unlock()
			if err != nil {
				RecordError(kind+" "+what(), clip(err.Error()))
			}
		})
	}
}

// InFlightCount is how many runs are in flight (InFlight's length,
// without listing them).
func InFlightCount() int {
	runsMu.Lock()
	defer runsMu.Unlock()
	return len(runs)
}

// InFlight lists the runs in flight, the longest first.
func InFlight(now time.Time) []Run {
	runsMu.Lock()
	out := make([]Run, 0, len(runs))
	for r := range runs {
		c := *r
		c.What, c.label = r.label(), nil
		c.Seconds = math.Round(now.Sub(c.Started).Seconds()*10) / 10
		out = append(out, c)
	}
	runsMu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	return out
}

// Error is one of the last errors.
type Error struct {
	Time    time.Time `json:"time"`
	Where   string    `json:"where"`
	Message string    `json:"message"`
}

const keptErrors = 20

var (
	errorsMu sync.Mutex
	lastErrs []Error
)

// RecordError keeps an error for the control page (the last 20).
func RecordError(where, msg string) {
	errorsMu.Lock()
	defer errorsMu.Unlock()
	lastErrs = append(lastErrs, Error{Time: time.Now().UTC(), Where: where, Message: msg})
	if len(lastErrs) > keptErrors {
		lastErrs = append([]Error(nil), lastErrs[len(lastErrs)-keptErrors:]...)
	}
}

// LastErrors are the last errors, the newest first.
func LastErrors() []Error {
	errorsMu.Lock()
	defer errorsMu.Unlock()
	out := make([]Error, len(lastErrs))
	for i, e := range lastErrs {
		out[len(lastErrs)-1-i] = e
	}
	return out
}
