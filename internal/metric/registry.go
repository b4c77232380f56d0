package metric

import (
	"math"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
)

// The registry: every series by its name with labels (name{k="v",...}),
// and the list the exposition writes, sorted by family, then by series.
var (
	regMu  sync.RWMutex
	reg    = map[string]value{}
	regAll []named
	sorted = true
)

// value is one series: a counter, a gauge or a histogram.
type value interface {
	typ() string
	// append appends the series' sample lines, series being its name
	// with labels and family its name without.
	append(b []byte, family, series string) []byte
}

// named is a series of the registry with its family.
type named struct {
	family, series string
	v              value
}

// lookup is the series named series of family, made by mk if it is new.
// A series asked for as another kind than it was made is answered as
// it was made (the caller's type assertion then fails and it does
// nothing).
func lookup(series, family string, mk func() value) value {
	regMu.RLock()
	v := reg[series]
	regMu.RUnlock()
	if v != nil {
		return v
	}
	regMu.Lock()
	defer regMu.Unlock()
	if v := reg[series]; v != nil {
		return v
	}
	v = mk()
	reg[series] = v
	regAll = append(regAll, named{family, series, v})
	sorted = false
	return v
}

// appendSeries appends nb's series, each family's after its # HELP and
// # TYPE lines.
func appendSeries(b []byte) []byte {
	regMu.Lock()
	if !sorted {
		// sort.Slice, not slices.SortFunc, which would link a pdqsort of
		// its own for named (bench/README.md, "Binary: sorts, metrics and
		// the rest").
		sort.Slice(regAll, func(i, j int) bool {
			a, b := regAll[i], regAll[j]
			return a.family < b.family || a.family == b.family && a.series < b.series
		})
		sorted = true
	}
	all := append([]named(nil), regAll...)
	regMu.Unlock()
	prev := ""
	for _, s := range all {
		if s.family != prev {
			b = meta(b, s.family, s.v.typ())
			prev = s.family
		}
		b = s.v.append(b, s.family, s.series)
	}
	return b
}

// counter is a counter's series.
type counter struct{ n atomic.Uint64 }

func newCounter() value { return new(counter) }

func (*counter) typ() string { return "counter" }

func (c *counter) append(b []byte, _, series string) []byte {
	return sample(b, series, "", "", c.n.Load())
}

// gauge is a gauge's series: its value, or the function read in its
// place at each scrape.
type gauge struct {
	bits atomic.Uint64
	f    atomic.Pointer[func() float64]
}

func newGauge() value { return new(gauge) }

func (*gauge) typ() string { return "gauge" }

func (g *gauge) append(b []byte, _, series string) []byte {
	v := math.Float64frombits(g.bits.Load())
	if f := g.f.Load(); f != nil {
		v = (*f)()
	}
	b = append(b, series...)
	b = append(b, ' ')
	return append(appendValue(b, v), '\n')
}

// histogram is a histogram's series: its count in each bucket (not
// cumulated), its sum and count.
type histogram struct {
	mu     sync.Mutex
	bounds []float64
	counts []uint64
	sum    float64
	count  uint64
}

func newHistogram(bounds []float64) value {
	return &histogram{bounds: bounds, counts: make([]uint64, len(bounds))}
}

func (*histogram) typ() string { return "histogram" }

func (h *histogram) observe(v float64) {
	i := 0 // the first bound ≥ v, or len(bounds) for +Inf's bucket
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.mu.Lock()
	h.sum += v
	h.count++
	if i < len(h.counts) {
		h.counts[i]++
	}
	h.mu.Unlock()
}

func (h *histogram) append(b []byte, family, series string) []byte {
	labels := series[len(family):] // "" or {k="v",...}
	h.mu.Lock()
	counts := append([]uint64(nil), h.counts...)
	sum, count := h.sum, h.count
	h.mu.Unlock()
	var cum uint64
	var le []byte
	for i, ub := range h.bounds {
		cum += counts[i]
		le = strconv.AppendFloat(le[:0], ub, 'g', -1, 64)
		b = sample(b, family+"_bucket", labels, string(le), cum)
	}
	b = sample(b, family+"_bucket", labels, "+Inf", count)
	b = append(b, family...)
	b = append(b, "_sum"...)
	b = append(b, labels...)
	b = append(b, ' ')
	b = append(appendValue(b, sum), '\n')
	return sample(b, family+"_count", labels, "", count)
}

// sample appends the line name{labels,le="le"} v; labels is "" or
// {k="v",...}, le is "" for none.
func sample(b []byte, name, labels, le string, v uint64) []byte {
	b = append(b, name...)
	switch {
	case le == "":
		b = append(b, labels...)
	case labels == "":
		b = append(b, `{le="`...)
		b = append(b, le...)
		b = append(b, `"}`...)
	default:
		b = append(b, labels[:len(labels)-1]...)
		b = append(b, `,le="`...)
		b = append(b, le...)
		b = append(b, `"}`...)
	}
	b = append(b, ' ')
	b = strconv.AppendUint(b, v, 10)
	return append(b, '\n')
}

// appendValue appends v as an integer when it is one (no exponent), else
// in the shortest form that reads back the same (+Inf, NaN as the
// format spells them).
func appendValue(b []byte, v float64) []byte {
	if float64(int64(v)) == v {
		return strconv.AppendInt(b, int64(v), 10)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}
