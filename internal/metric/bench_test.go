package metric

import (
	"testing"
	"time"
)

// BenchmarkHTTP is what each request answered costs the server: one
// counter, one histogram, the minute's bucket.
func BenchmarkHTTP(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		HTTP(Serve, "GET /cartridges/stream/{id}", "GET", 200, 300*time.Microsecond)
	}
}
