package metric

import (
	"math"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
)

// The Go runtime's series (go_*), under the names, types and buckets that
// Prometheus's and VictoriaMetrics's Go collectors use and Grafana's "Go
// processes" dashboards read: seven from runtime/metrics, the rest from
// runtime.MemStats.

// runtimeSeries are the runtime/metrics samples written, with their
// series' names.
var runtimeSeries = [...][2]string{
	{"/sched/latencies:seconds", "go_sched_latencies_seconds"},
	{"/sync/mutex/wait/total:seconds", "go_mutex_wait_seconds_total"},
	{"/cpu/classes/gc/mark/assist:cpu-seconds", "go_gc_mark_assist_cpu_seconds_total"},
	{"/cpu/classes/gc/total:cpu-seconds", "go_gc_cpu_seconds_total"},
	{"/gc/pauses:seconds", "go_gc_pauses_seconds"},
	{"/cpu/classes/scavenge/total:cpu-seconds", "go_scavenge_cpu_seconds_total"},
	{"/gc/gomemlimit:bytes", "go_memlimit_bytes"},
}

// maxRuntimeBuckets bounds the le buckets of a runtime histogram (the
// runtime's have about 160).
const maxRuntimeBuckets = 30

// appendGo appends the Go runtime's series.
func appendGo(b []byte) []byte {
	var samples [len(runtimeSeries)]metrics.Sample
	for i, s := range runtimeSeries {
		samples[i].Name = s[0]
	}
	metrics.Read(samples[:])
	for i, s := range runtimeSeries {
		name := s[1]
		switch v := samples[i].Value; v.Kind() {
		case metrics.KindUint64:
			b = oneU(b, name, kindOf(name), v.Uint64())
		case metrics.KindFloat64:
			b = oneF(b, name, kindOf(name), v.Float64())
		case metrics.KindFloat64Histogram:
			b = runtimeHistogram(b, name, v.Float64Histogram())
		} // KindBad: a runtime without that metric
	}

	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b = oneU(b, "go_memstats_alloc_bytes", "gauge", ms.Alloc)
	b = oneU(b, "go_memstats_alloc_bytes_total", "counter", ms.TotalAlloc)
	b = oneU(b, "go_memstats_buck_hash_sys_bytes", "gauge", ms.BuckHashSys)
	b = oneU(b, "go_memstats_frees_total", "counter", ms.Frees)
	b = oneF(b, "go_memstats_gc_cpu_fraction", "gauge", ms.GCCPUFraction)
	b = oneU(b, "go_memstats_gc_sys_bytes", "gauge", ms.GCSys)
	b = oneU(b, "go_memstats_heap_alloc_bytes", "gauge", ms.HeapAlloc)
	b = oneU(b, "go_memstats_heap_idle_bytes", "gauge", ms.HeapIdle)
	b = oneU(b, "go_memstats_heap_inuse_bytes", "gauge", ms.HeapInuse)
	b = oneU(b, "go_memstats_heap_objects", "gauge", ms.HeapObjects)
	b = oneU(b, "go_memstats_heap_released_bytes", "gauge", ms.HeapReleased)
	b = oneU(b, "go_memstats_heap_sys_bytes", "gauge", ms.HeapSys)
	b = oneF(b, "go_memstats_last_gc_time_seconds", "gauge", float64(ms.LastGC)/1e9)
	b = oneU(b, "go_memstats_lookups_total", "counter", ms.Lookups)
	b = oneU(b, "go_memstats_mallocs_total", "counter", ms.Mallocs)
	b = oneU(b, "go_memstats_mcache_inuse_bytes", "gauge", ms.MCacheInuse)
	b = oneU(b, "go_memstats_mcache_sys_bytes", "gauge", ms.MCacheSys)
	b = oneU(b, "go_memstats_mspan_inuse_bytes", "gauge", ms.MSpanInuse)
	b = oneU(b, "go_memstats_mspan_sys_bytes", "gauge", ms.MSpanSys)
	b = oneU(b, "go_memstats_next_gc_bytes", "gauge", ms.NextGC)
	b = oneU(b, "go_memstats_other_sys_bytes", "gauge", ms.OtherSys)
	b = oneU(b, "go_memstats_stack_inuse_bytes", "gauge", ms.StackInuse)
	b = oneU(b, "go_memstats_stack_sys_bytes", "gauge", ms.StackSys)
	b = oneU(b, "go_memstats_sys_bytes", "gauge", ms.Sys)
	b = oneU(b, "go_cgo_calls_count", "counter", uint64(runtime.NumCgoCall()))
	b = oneU(b, "go_cpu_count", "gauge", uint64(runtime.NumCPU()))

	// go_gc_duration_seconds: quantiles of the last 256 pauses (the
	// MemStats ring, zeros where fewer GCs ran), min and max at 0 and 1.
	pauses := make([]float64, len(ms.PauseNs))
	for i, ns := range ms.PauseNs {
		pauses[i] = float64(ns) / 1e9
	}
	slices.Sort(pauses)
	b = meta(b, "go_gc_duration_seconds", "summary")
	for _, q := range [...]struct{ phi, v float64 }{
		{0, pauses[0]},
		{.25, pauses[int(.25*float64(len(pauses)-1)+.5)]},
		{.5, pauses[int(.5*float64(len(pauses)-1)+.5)]},
		{.75, pauses[int(.75*float64(len(pauses)-1)+.5)]},
		{1, pauses[len(pauses)-1]},
	} {
		b = append(b, `go_gc_duration_seconds{quantile="`...)
		b = strconv.AppendFloat(b, q.phi, 'g', -1, 64)
		b = append(b, `"} `...)
		b = strconv.AppendFloat(b, q.v, 'g', -1, 64)
		b = append(b, '\n')
	}
	b = append(b, "go_gc_duration_seconds_sum "...)
	b = strconv.AppendFloat(b, float64(ms.PauseTotalNs)/1e9, 'g', -1, 64)
	b = append(b, "\ngo_gc_duration_seconds_count "...)
	b = strconv.AppendUint(b, uint64(ms.NumGC), 10)
	b = append(b, '\n')

	b = oneU(b, "go_gc_forced_count", "counter", uint64(ms.NumForcedGC))
	b = oneU(b, "go_gomaxprocs", "gauge", uint64(runtime.GOMAXPROCS(0)))
	b = oneU(b, "go_goroutines", "gauge", uint64(runtime.NumGoroutine()))
	threads, _ := runtime.ThreadCreateProfile(nil)
	b = oneU(b, "go_threads", "gauge", uint64(threads))

	b = meta(b, "go_info", "gauge")
	b = append(b, `go_info{version=`...)
	b = strconv.AppendQuote(b, runtime.Version())
	b = append(b, "} 1\n"...)
	b = meta(b, "go_info_ext", "gauge")
	b = append(b, `go_info_ext{compiler=`...)
	b = strconv.AppendQuote(b, runtime.Compiler)
	b = append(b, `, GOARCH=`...)
	b = strconv.AppendQuote(b, runtime.GOARCH)
	b = append(b, `, GOOS=`...)
	b = strconv.AppendQuote(b, runtime.GOOS)
	b = append(b, `, GOROOT=`...)
	b = strconv.AppendQuote(b, runtime.GOROOT())
	return append(b, "} 1\n"...)
}

// kindOf is the type of a runtime or process series of one sample: a
// counter when its name ends in _total.
func kindOf(name string) string {
	if strings.HasSuffix(name, "_total") {
		return "counter"
	}
	return "gauge"
}

// oneU appends a family of one series without labels: its # HELP and
// # TYPE lines and its sample.
func oneU(b []byte, name, typ string, v uint64) []byte {
	b = meta(b, name, typ)
	b = append(b, name...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, v, 10)
	return append(b, '\n')
}

// oneF is oneU for a float, written in the shortest form that reads back
// the same (an exponent past 1e21, or for a Unix time: 1.79e+09).
func oneF(b []byte, name, typ string, v float64) []byte {
	b = meta(b, name, typ)
	b = append(b, name...)
	b = append(b, ' ')
	b = strconv.AppendFloat(b, v, 'g', -1, 64)
	return append(b, '\n')
}

// runtimeHistogram appends a runtime/metrics histogram in at most
// maxRuntimeBuckets le buckets: the buckets of a _seconds histogram past
// one second are folded into +Inf's, and of the rest every step-th bound
// is written. The runtime keeps no sum, so there are no _sum and _count.
func runtimeHistogram(b []byte, name string, h *metrics.Float64Histogram) []byte {
	bounds, counts := h.Buckets, h.Counts
	if len(bounds) != len(counts)+1 {
		return b
	}
	var tail uint64
	if strings.HasSuffix(name, "_seconds") {
		for len(bounds) > 0 && bounds[len(bounds)-1] > 1 {
			bounds = bounds[:len(bounds)-1]
			tail += counts[len(counts)-1]
			counts = counts[:len(counts)-1]
		}
	}
	step := float64(len(bounds)) / maxRuntimeBuckets
	var total uint64
	next := 0.0
	b = meta(b, name, "histogram")
	var le []byte
	for i, n := range counts {
		total += n
		if float64(i) >= next {
			next += step
			if ub := bounds[i+1]; !math.IsInf(ub, 1) {
				le = strconv.AppendFloat(le[:0], ub, 'g', -1, 64)
				b = sample(b, name+"_bucket", "", string(le), total)
			}
		}
	}
	return sample(b, name+"_bucket", "", "+Inf", total+tail)
}
