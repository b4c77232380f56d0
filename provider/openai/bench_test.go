package openai

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/nbots/nb/provider"
)

// streamBody is an SSE body of n chunks of size bytes of text each.
func streamBody(n, size int) []byte {
	var b bytes.Buffer
	piece := strings.Repeat("x", size)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"logprobs\":null,\"finish_reason\":null}]}\n\n", piece)
	}
	b.WriteString("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	return b.Bytes()
}

// BenchmarkDecodeStream measures the SSE and JSON decoding of a streamed
// answer: 10,000 chunks of 1 KiB; the figure is answer text per second.
func BenchmarkDecodeStream(b *testing.B) {
	body := streamBody(10000, 1024)
	b.SetBytes(10000 * 1024)
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		_, err := official.DecodeStream(context.Background(), bytes.NewReader(body), func(ev provider.Event) { n += len(ev.Text) })
		if err != nil || n != 10000*1024 {
			b.Fatal(err, n)
		}
	}
	_ = io.Discard
}
