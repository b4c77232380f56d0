package shell

import (
	"fmt"
	"sync"
)

// capture keeps a stream's first and last bytes within a cap: a command
// that prints gigabytes costs nb a bounded amount of memory, and both the
// start of its output and its end (where errors and summaries are) stay.
type capture struct {
	mu      sync.Mutex
	max     int
	head    []byte
	tail    []byte // a ring of the last max/2 bytes once the head is full
	start   int    // the ring's oldest byte
	dropped int64
}

func newCapture(max int) *capture { return &capture{max: max} }

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(p)
	headMax := c.max / 2
	if room := headMax - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	tailMax := c.max - headMax
	for len(p) > 0 {
		if len(c.tail) < tailMax {
			k := min(tailMax-len(c.tail), len(p))
			c.tail = append(c.tail, p[:k]...)
			p = p[k:]
			continue
		}
		// The ring is full: each new byte pushes the oldest out.
		if len(p) >= tailMax {
			// The old ring and all but the last tailMax bytes of p go.
			c.dropped += int64(len(p))
			copy(c.tail, p[len(p)-tailMax:])
			c.start = 0
			break
		}
		k := min(tailMax-c.start, len(p))
		copy(c.tail[c.start:], p[:k])
		c.dropped += int64(k)
		c.start = (c.start + k) % tailMax
		p = p[k:]
	}
	return n, nil
}

// String returns what was kept, with a note where bytes were left out.
func (c *capture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	tail := append(append([]byte{}, c.tail[c.start:]...), c.tail[:c.start]...)
	if c.dropped == 0 {
		return string(c.head) + string(tail)
	}
	return string(c.head) + fmt.Sprintf("\n[... %d bytes of output left out ...]\n", c.dropped) + string(tail)
}
