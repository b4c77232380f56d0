package cartridge

import (
	"math"
	"sort"
	"strconv"
	"time"
)

// FunctionLimits are the limits a cartridge sets on each call of its
// adapters and tools, under the nb extension key
//
//	safety:
//	  functions:
//	    limits: {cpu-seconds: 2, memory: 128, timeout: 30}
//
// A zero field was not set: the script runtime's default applies (which
// depends on safety.functions.sandboxed; see docs/scripts.md).
type FunctionLimits struct {
	// CPUSeconds is cpu-seconds: the interpreter's work, in seconds of a
	// tight loop (the runtime converts it to its CPU units).
	CPUSeconds float64
	// Memory is memory (given in MiB), in bytes.
	Memory uint64
	// Timeout is timeout (given in seconds): the wall-clock time of a call.
	Timeout time.Duration
}

// limitKeys are the keys of safety.functions.limits.
var limitKeys = []string{"cpu-seconds", "memory", "timeout"}

// limitsPath is where the limits are.
const limitsPath = "safety.functions.limits"

// FunctionLimits returns safety.functions.limits (validated when the
// cartridge loaded).
func (c *Cartridge) FunctionLimits() FunctionLimits {
	m := c.Map("safety", "functions", "limits")
	var l FunctionLimits
	if v, ok := number(m["cpu-seconds"]); ok {
		l.CPUSeconds = v
	}
	if v, ok := number(m["memory"]); ok {
		l.Memory = uint64(v * (1 << 20))
	}
	if v, ok := number(m["timeout"]); ok {
		l.Timeout = time.Duration(v * float64(time.Second))
	}
	return l
}

// number returns a YAML number as a float64.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// maxLimits bound what a cartridge may ask for: a day of CPU or time and
// a terabyte of memory are typing mistakes, and would overflow the
// runtime's counters.
var maxLimits = map[string]float64{"cpu-seconds": 86400, "memory": 1 << 20, "timeout": 86400}

// functionLimits checks safety.functions.limits: a mapping of the three
// keys, each a number above 0.
func (k *checker) functionLimits(safety map[string]any) {
	functions, _ := safety["functions"].(map[string]any)
	limits := k.mapping(functions, "safety.functions", "limits")
	keys := make([]string, 0, len(limits))
	for key := range limits {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		path := limitsPath + "." + key
		max, known := maxLimits[key]
		if !known {
			k.fail(path, "unknown limit%s", nearestOrKnown(key, limitKeys))
			continue
		}
		v := limits[key]
		if v == nil {
			continue
		}
		n, ok := number(v)
		unit := map[string]string{"cpu-seconds": "seconds", "memory": "MiB", "timeout": "seconds"}[key]
		switch {
		case !ok:
			k.fail(path, "must be a number of %s, not %s", unit, kind(v))
		case n <= 0 || math.IsNaN(n):
			k.fail(path, "must be a number of %s above 0, not %v", unit, v)
		case n > max:
			k.fail(path, "must be at most %s %s, not %v", strconv.FormatFloat(max, 'f', -1, 64), unit, v)
		}
	}
}
