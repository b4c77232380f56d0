// Command fakeprovider serves the in-process OpenAI fake on a local port,
// for benchmarks of the nb binary against an instant provider. It prints
// its address on stdout once it listens.
//
//	fakeprovider -chunks 100000 -size 1024   # a long streamed answer
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"strings"

	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	chunks := flag.Int("chunks", 1, "number of streamed text chunks in every answer")
	size := flag.Int("size", 6, "bytes of text in each chunk")
	flag.Parse()

	piece := strings.Repeat("x", *size)
	reply := providertest.Reply{Chunks: make([]string, *chunks)}
	for i := range reply.Chunks {
		reply.Chunks[i] = piece
	}
	fake := openaitest.New(func(providertest.Turn) providertest.Reply { return reply })
	fake.Recorder = nil
	fake.SplitBytes = 1 << 20 // one write per frame
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("http://" + ln.Addr().String())
	os.Stdout.Sync() //nolint:errcheck // a pipe
	log.Fatal(http.Serve(ln, fake))
}
