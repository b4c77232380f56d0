package metric

import "syscall"

// processStart has nothing to read on macOS.
func processStart() {}

// appendProcess appends what macOS gives without cgo, as
// VictoriaMetrics's collector did: the CPU time (getrusage) and the
// address space's soft limit.
func appendProcess(b []byte) []byte {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		b = oneF(b, "process_cpu_seconds_total", "gauge", float64(ru.Stime.Nano()+ru.Utime.Nano())/1e9)
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_AS, &lim) == nil {
		b = oneF(b, "process_virtual_memory_max_bytes", "gauge", float64(lim.Cur))
	}
	return b
}
