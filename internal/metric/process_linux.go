package metric

import (
	"bytes"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The process's series (process_*), read from /proc/self and the
// process's cgroup at each scrape, under the names of VictoriaMetrics's
// and Prometheus's process collectors. Nothing is read before the first
// scrape or the first Handler: a command that serves no metrics opens
// none of these files.

// startTime is process_start_time_seconds: when the package was
// initialised.
var startTime = time.Now().Unix()

// processStart reads the counters the cgroup's series count from.
func processStart() { pressureBase() }

// userHZ is the unit of the times in /proc/self/stat (USER_HZ, 100 on
// every Linux that Go runs on).
const userHZ = 100

// appendProcess appends the process's series; none when /proc/self/stat
// cannot be read.
func appendProcess(b []byte) []byte {
	base := pressureBase()
	data, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return b
	}
	// The fields after the command, which is in parentheses and may
	// hold anything: state ppid pgrp session tty_nr tpgid flags minflt
	// cminflt majflt cmajflt utime stime cutime cstime priority nice
	// num_threads itrealvalue starttime vsize rss ...
	n := bytes.LastIndex(data, []byte(") "))
	if n < 0 {
		return b
	}
	f := strings.Fields(string(data[n+2:]))
	if len(f) < 22 {
		return b
	}
	u := func(i int) uint64 { v, _ := strconv.ParseUint(f[i], 10, 64); return v }
	utime, stime := u(11), u(12)
	b = oneF(b, "process_cpu_seconds_system_total", "counter", float64(stime)/userHZ)
	b = oneF(b, "process_cpu_seconds_total", "counter", float64(utime+stime)/userHZ)
	b = oneF(b, "process_cpu_seconds_user_total", "counter", float64(utime)/userHZ)
	b = oneU(b, "process_major_pagefaults_total", "counter", u(9))
	b = oneU(b, "process_minor_pagefaults_total", "counter", u(7))
	b = oneU(b, "process_num_threads", "gauge", u(17))
	b = oneU(b, "process_resident_memory_bytes", "gauge", u(21)*uint64(os.Getpagesize()))
	b = oneU(b, "process_start_time_seconds", "gauge", uint64(startTime))
	b = oneU(b, "process_virtual_memory_bytes", "gauge", u(20))

	// /proc/self/status: the peaks and the parts of the resident set.
	if st, err := os.ReadFile("/proc/self/status"); err == nil {
		kb := map[string]uint64{}
		for line := range strings.Lines(string(st)) {
			if w := strings.Fields(line); len(w) == 3 && w[2] == "kB" {
				v, _ := strconv.ParseUint(w[1], 10, 64)
				kb[w[0]] = v * 1024
			}
		}
		b = oneU(b, "process_virtual_memory_peak_bytes", "gauge", kb["VmPeak:"])
		b = oneU(b, "process_resident_memory_peak_bytes", "gauge", kb["VmHWM:"])
		b = oneU(b, "process_resident_memory_anon_bytes", "gauge", kb["RssAnon:"])
		b = oneU(b, "process_resident_memory_file_bytes", "gauge", kb["RssFile:"])
		b = oneU(b, "process_resident_memory_shared_bytes", "gauge", kb["RssShmem:"])
	}

	// /proc/self/io (zeros where it cannot be read: a process without
	// the right to). Gauges, as the collectors name them.
	io := map[string]uint64{}
	if data, err := os.ReadFile("/proc/self/io"); err == nil {
		for line := range strings.Lines(string(data)) {
			if k, v, ok := strings.Cut(strings.TrimSpace(line), ": "); ok {
				io[k], _ = strconv.ParseUint(v, 10, 64)
			}
		}
	}
	b = oneU(b, "process_io_read_bytes_total", "gauge", io["rchar"])
	b = oneU(b, "process_io_written_bytes_total", "gauge", io["wchar"])
	b = oneU(b, "process_io_read_syscalls_total", "gauge", io["syscr"])
	b = oneU(b, "process_io_write_syscalls_total", "gauge", io["syscw"])
	b = oneU(b, "process_io_storage_read_bytes_total", "gauge", io["read_bytes"])
	b = oneU(b, "process_io_storage_written_bytes_total", "gauge", io["write_bytes"])

	// The cgroup's pressure (cgroup v2) and CPU throttling, counted from
	// when metrics were first asked for.
	if base.psi != nil {
		if now, ok := readPressure(base.v2); ok {
			for i, name := range [...]string{
				"process_pressure_cpu_waiting_seconds_total", "process_pressure_cpu_stalled_seconds_total",
				"process_pressure_io_waiting_seconds_total", "process_pressure_io_stalled_seconds_total",
				"process_pressure_memory_waiting_seconds_total", "process_pressure_memory_stalled_seconds_total",
			} {
				b = oneF(b, name, "counter", float64(now[i]-base.psi[i])/1e6)
			}
		}
	}
	if base.throttled != nil {
		if now, ok := readThrottled(base.cpuStat); ok {
			b = oneF(b, "process_cgroup_cpu_throttled_seconds_total", "counter", float64(now-*base.throttled)/1e9)
		}
	}
	return b
}

// cgroupBase is where the process's cgroup files are, and their counters
// when metrics were first asked for (nil: not available).
type cgroupBase struct {
	v2, cpuStat string
	psi         *[6]uint64 // some and full totals of cpu, io, memory, µs
	throttled   *uint64    // ns
}

// pressureBase reads the cgroup's paths and counters once, at the first
// scrape or Handler, not at the process's start.
var pressureBase = sync.OnceValue(func() cgroupBase {
	var c cgroupBase
	c.v2, c.cpuStat = cgroupPaths()
	if p, ok := readPressure(c.v2); ok {
		c.psi = &p
	}
	if t, ok := readThrottled(c.cpuStat); ok {
		c.throttled = &t
	}
	return c
})

// cgroupPaths are the process's cgroup v2 directory and its cpu.stat
// file ("" for none), from /proc/self/cgroup: "0::/path" is the v2
// hierarchy's line, "N:...,cpu,...:/path" the v1 cpu controller's.
func cgroupPaths() (v2, cpuStat string) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", ""
	}
	mount := ""
	for _, mp := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		var st syscall.Statfs_t
		if syscall.Statfs(mp, &st) == nil && st.Type == 0x63677270 { // CGROUP2_SUPER_MAGIC
			mount = mp
			break
		}
	}
	v1 := ""
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSuffix(line, "\n")
		if rel, ok := strings.CutPrefix(line, "0::"); ok && v2 == "" && mount != "" {
			if rel = strings.TrimSpace(rel); rel != "" {
				v2 = path.Join(mount, rel)
			}
		}
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 && v1 == "" {
			for ctrl := range strings.SplitSeq(parts[1], ",") {
				if strings.TrimSpace(ctrl) == "cpu" {
					v1 = strings.TrimSpace(parts[2])
					break
				}
			}
		}
	}
	if mount == "/sys/fs/cgroup" {
		if v2 == "" {
			return "", ""
		}
		return v2, v2 + "/cpu.stat"
	}
	if v1 != "" {
		cpuStat = path.Join("/sys/fs/cgroup/cpu", v1, "/cpu.stat")
	}
	return v2, cpuStat
}

// readPressure reads the some and full totals (µs) of cpu.pressure,
// io.pressure and memory.pressure in dir.
func readPressure(dir string) ([6]uint64, bool) {
	var out [6]uint64
	if dir == "" {
		return out, false
	}
	for i, name := range [...]string{"cpu.pressure", "io.pressure", "memory.pressure"} {
		data, err := os.ReadFile(dir + "/" + name)
		if err != nil {
			return out, false
		}
		for line := range strings.Lines(string(data)) {
			line = strings.TrimSpace(line)
			j := -1
			switch {
			case strings.HasPrefix(line, "some "):
				j = 2 * i
			case strings.HasPrefix(line, "full "):
				j = 2*i + 1
			default:
				continue
			}
			_, total, ok := strings.Cut(line, "total=")
			v, err := strconv.ParseUint(total, 10, 64)
			if !ok || err != nil {
				return out, false
			}
			out[j] = v
		}
	}
	return out, true
}

// readThrottled reads the time the cgroup's CPU was throttled, in ns,
// from cpu.stat (throttled_usec in v2, throttled_time in ns in v1).
func readThrottled(file string) (uint64, bool) {
	if file == "" {
		return 0, false
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	var ns uint64
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return 0, false
		}
		switch f[0] {
		case "throttled_usec":
			ns = v * 1000
		case "throttled_time":
			ns = v
		}
	}
	return ns, true
}
