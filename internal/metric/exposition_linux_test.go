package metric

import (
	"math"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
)

var goldenRuns atomic.Int32

// TestExpositionGolden: the text of counters, gauges and histograms, with
// labels and without, is what VictoriaMetrics/metrics v1.45.0 (nb's
// library before registry.go) wrote for the same calls, byte for byte
// (testdata/exposition.txt was its output): the order of families and
// series, integers without exponents, floats in their shortest form,
// negative and NaN observations not counted, a counter at 0 written.
func TestExpositionGolden(t *testing.T) {
	NewCounter("nb_test_golden_total", "A test counter.").Inc("k", "v")
	NewCounter("nb_test_golden_total", "A test counter.").Add(5, "k", "a")
	NewCounter("nb_test_golden_total", "A test counter.").Add(-1, "k", "neg")
	NewCounter("nb_test_golden2_total", "A test counter.").Add(0)
	g := NewGauge("nb_test_golden_g", "A test gauge.")
	g.Set(1.5)
	g.Set(-3, "x", "y")
	g.Set(1e21, "x", "big")
	g.Set(math.Inf(1), "x", "inf")
	g.Set(1e-7, "x", "tiny")
	g.Set(1234567, "x", "million")
	g.Set(0, "x", "add") // -count: the same series again
	g.Add(2.25, "x", "add")
	g.Add(1, "x", "add")
	NewGauge("nb_test_golden_gf", "A test gauge.").Func(func() float64 { return 3 }, "a", "b")
	h := NewHistogram("nb_test_golden_seconds", "A test histogram.", .005, .1, 1, 2.5, 300)
	h.Observe(.5, "k", "v")
	h.Observe(.1, "k", "v")
	h.Observe(1000, "k", "v")
	h.Observe(-1, "k", "v")
	h.Observe(math.NaN(), "k", "v")
	h.Observe(.0333, "k", "w", "route", "GET /a/{id}")
	h.Observe(2)
	NewHistogram("nb_test_golden_a_seconds", "Another.", 1).Observe(3)
	NewCounter("nb_test_golden_a", "Prefix family.").Inc()
	NewCounter("nb_test_golden_a_b", "Prefix family.").Inc()
	var b strings.Builder
	Write(&b)
	var got strings.Builder
	for line := range strings.Lines(b.String()) {
		if strings.Contains(line, "nb_test_golden") {
			got.WriteString(line)
		}
	}
	want, err := os.ReadFile("testdata/exposition.txt")
	if err != nil {
		t.Fatal(err)
	}
	// -count > 1 adds to the same series: only the first run compares.
	if goldenRuns.Add(1) == 1 && got.String() != string(want) {
		t.Errorf("exposition differs\ngot:\n%s\nwant:\n%s", got.String(), want)
	}
}

// TestRuntimeAndProcessSeries: every go_* and process_* family that
// VictoriaMetrics/metrics v1.45.0 wrote on Linux, with its type, and the
// le buckets of the runtime's histograms up to +Inf. The cgroup's
// pressure and throttling series are there where the cgroup has them.
func TestRuntimeAndProcessSeries(t *testing.T) {
	var b strings.Builder
	Write(&b)
	types := map[string]string{}
	for line := range strings.Lines(b.String()) {
		if f := strings.Fields(line); len(f) == 4 && f[1] == "TYPE" {
			if _, dup := types[f[2]]; dup {
				t.Errorf("%s has two TYPE lines", f[2])
			}
			types[f[2]] = f[3]
		}
	}
	for name, typ := range map[string]string{
		"go_sched_latencies_seconds":             "histogram",
		"go_mutex_wait_seconds_total":            "counter",
		"go_gc_mark_assist_cpu_seconds_total":    "counter",
		"go_gc_cpu_seconds_total":                "counter",
		"go_gc_pauses_seconds":                   "histogram",
		"go_scavenge_cpu_seconds_total":          "counter",
		"go_memlimit_bytes":                      "gauge",
		"go_memstats_alloc_bytes":                "gauge",
		"go_memstats_alloc_bytes_total":          "counter",
		"go_memstats_buck_hash_sys_bytes":        "gauge",
		"go_memstats_frees_total":                "counter",
		"go_memstats_gc_cpu_fraction":            "gauge",
		"go_memstats_gc_sys_bytes":               "gauge",
		"go_memstats_heap_alloc_bytes":           "gauge",
		"go_memstats_heap_idle_bytes":            "gauge",
		"go_memstats_heap_inuse_bytes":           "gauge",
		"go_memstats_heap_objects":               "gauge",
		"go_memstats_heap_released_bytes":        "gauge",
		"go_memstats_heap_sys_bytes":             "gauge",
		"go_memstats_last_gc_time_seconds":       "gauge",
		"go_memstats_lookups_total":              "counter",
		"go_memstats_mallocs_total":              "counter",
		"go_memstats_mcache_inuse_bytes":         "gauge",
		"go_memstats_mcache_sys_bytes":           "gauge",
		"go_memstats_mspan_inuse_bytes":          "gauge",
		"go_memstats_mspan_sys_bytes":            "gauge",
		"go_memstats_next_gc_bytes":              "gauge",
		"go_memstats_other_sys_bytes":            "gauge",
		"go_memstats_stack_inuse_bytes":          "gauge",
		"go_memstats_stack_sys_bytes":            "gauge",
		"go_memstats_sys_bytes":                  "gauge",
		"go_cgo_calls_count":                     "counter",
		"go_cpu_count":                           "gauge",
		"go_gc_duration_seconds":                 "summary",
		"go_gc_forced_count":                     "counter",
		"go_gomaxprocs":                          "gauge",
		"go_goroutines":                          "gauge",
		"go_threads":                             "gauge",
		"go_info":                                "gauge",
		"go_info_ext":                            "gauge",
		"process_cpu_seconds_system_total":       "counter",
		"process_cpu_seconds_total":              "counter",
		"process_cpu_seconds_user_total":         "counter",
		"process_major_pagefaults_total":         "counter",
		"process_minor_pagefaults_total":         "counter",
		"process_num_threads":                    "gauge",
		"process_resident_memory_bytes":          "gauge",
		"process_start_time_seconds":             "gauge",
		"process_virtual_memory_bytes":           "gauge",
		"process_virtual_memory_peak_bytes":      "gauge",
		"process_resident_memory_peak_bytes":     "gauge",
		"process_resident_memory_anon_bytes":     "gauge",
		"process_resident_memory_file_bytes":     "gauge",
		"process_resident_memory_shared_bytes":   "gauge",
		"process_io_read_bytes_total":            "gauge",
		"process_io_written_bytes_total":         "gauge",
		"process_io_read_syscalls_total":         "gauge",
		"process_io_write_syscalls_total":        "gauge",
		"process_io_storage_read_bytes_total":    "gauge",
		"process_io_storage_written_bytes_total": "gauge",
	} {
		if got := types[name]; got != typ {
			t.Errorf("# TYPE %s is %q, want %q", name, got, typ)
		}
	}
	if base := pressureBase(); base.psi != nil {
		for _, name := range []string{
			"process_pressure_cpu_waiting_seconds_total", "process_pressure_cpu_stalled_seconds_total",
			"process_pressure_io_waiting_seconds_total", "process_pressure_io_stalled_seconds_total",
			"process_pressure_memory_waiting_seconds_total", "process_pressure_memory_stalled_seconds_total",
		} {
			if types[name] != "counter" {
				t.Errorf("%s missing under cgroup v2 (%s)", name, base.v2)
			}
		}
	}
	if base := pressureBase(); base.throttled != nil && types["process_cgroup_cpu_throttled_seconds_total"] != "counter" {
		t.Errorf("process_cgroup_cpu_throttled_seconds_total missing (%s)", base.cpuStat)
	}
	out := b.String()
	for _, want := range []string{
		`go_sched_latencies_seconds_bucket{le="0"} `,
		`go_sched_latencies_seconds_bucket{le="+Inf"} `,
		`go_gc_pauses_seconds_bucket{le="+Inf"} `,
		`go_gc_duration_seconds{quantile="0.25"} `,
		"go_gc_duration_seconds_count ",
		`go_info{version="` + runtime.Version() + `"} 1` + "\n",
		`go_info_ext{compiler="gc", GOARCH="` + runtime.GOARCH + `", GOOS="linux", GOROOT=`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q", want)
		}
	}
	if n := strings.Count(out, "go_sched_latencies_seconds_bucket{"); n < 10 || n > 32 {
		t.Errorf("go_sched_latencies_seconds has %d buckets, want at most 30 and +Inf", n)
	}
}
