package gatewayrun

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"
)

// burstProfileEnv names a path: BenchmarkGatewayTurn then writes, once
// its clock has run for a second (100 turns in flight), the heap profile
// of what is live at that moment to path.heap (after a collection: the
// turns in flight hold it), the goroutines to path.goroutine, and the
// runtime's figures of the moment to stdout:
//
//	NB_BENCH_BURST_PROFILE=/tmp/burst go test ./gateway/gatewayrun -run '^$' -bench GatewayTurn -benchtime 5000x -o /tmp/turn.test
//	go tool pprof -sample_index=inuse_space -top /tmp/turn.test /tmp/burst.heap
//
// The benchmark runs in one process with its clients and the fake model:
// their share is told apart by function (openaitest, the benchmark's
// own goroutines).
const burstProfileEnv = "NB_BENCH_BURST_PROFILE"

// maxStackEnv, set to a number of bytes, bounds every goroutine's stack
// to it (debug.SetMaxStack): the process then dies with the stack of
// the first goroutine that needed more, which tells how deep a turn goes
// (at this commit a turn's goroutine grows past 16 KiB, encoding the
// request's tool schemas, and stays within 32 KiB).
const maxStackEnv = "NB_BENCH_MAXSTACK"

// burstProfile starts the profile burstProfileEnv asks for, if any, and
// applies maxStackEnv; the function it returns waits for the profile.
func burstProfile(tb testing.TB) (wait func()) {
	if n, _ := strconv.Atoi(os.Getenv(maxStackEnv)); n > 0 {
		debug.SetMaxStack(n)
	}
	path := os.Getenv(burstProfileEnv)
	if path == "" {
		return func() {}
	}
	runtime.MemProfileRate = 4096
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(time.Second)
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms
		runtime.GC()
		runtime.ReadMemStats(&ms)
		fmt.Printf("burst: goroutines=%d heap-inuse-before-gc=%d heap-alloc-after-gc=%d heap-inuse=%d stack-inuse=%d heap-sys=%d heap-released=%d next-gc=%d\n",
			runtime.NumGoroutine(), before.HeapInuse, ms.HeapAlloc, ms.HeapInuse, ms.StackInuse, ms.HeapSys, ms.HeapReleased, ms.NextGC)
		for _, p := range []string{"heap", "goroutine"} {
			f, err := os.Create(path + "." + p)
			if err != nil {
				tb.Error(err)
				return
			}
			pprof.Lookup(p).WriteTo(f, 0) //nolint:errcheck // a diagnosis
			f.Close()
		}
	}()
	return func() { <-done }
}
