// Command otlpsink is an OTLP/HTTP traces endpoint for benchmarks: it
// answers every POST to /v1/traces with 200 and counts the spans, and
// prints its address on standard output and the count on SIGTERM. It
// counts without decoding (a span is the one object with a
// startTimeUnixNano field), so that the CPU it takes from the machine
// the benchmark runs on is little: a collector's decoding is not nb's
// cost. The tests of package tracing and cmd/nb decode what nb sends.
package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
)

// startField is in each span, and nowhere else (inside a string its
// quotes would be escaped).
var startField = []byte(`"startTimeUnixNano":`)

var bufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func main() {
	var spans atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("http://" + ln.Addr().String())
	http.HandleFunc("POST /v1/traces", func(w http.ResponseWriter, r *http.Request) {
		buf := bufs.Get().(*bytes.Buffer)
		defer bufs.Put(buf)
		buf.Reset()
		if _, err := buf.ReadFrom(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		spans.Add(int64(bytes.Count(buf.Bytes(), startField)))
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte("{}")) //nolint:errcheck // benchmark
	})
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		<-sig
		fmt.Fprintf(os.Stderr, "otlpsink: %d spans received\n", spans.Load())
		os.Exit(0)
	}()
	http.Serve(ln, nil) //nolint:errcheck // runs until killed
}
