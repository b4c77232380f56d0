// Command bareproxy is the floor for nb serve's added latency: the least
// a Go HTTP server can do between a client and the provider. It relays
// each request's body to -upstream with a pooled net/http client and
// copies the answer back, flushing as it reads (for streams), parsing
// nothing. `openaiload latency -url BAREPROXY/v1,NB/v1 -direct FAKE/v1`
// puts it beside nb in one run: what it adds is the machine's (two
// loopback hops, the scheduler's hand-offs, net/http on both sides), and
// what nb adds beyond it is nb's own.
//
//	bareproxy -listen 127.0.0.1:3050 -upstream http://127.0.0.1:PORT
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:3050", "address to listen on")
	upstream := flag.String("upstream", "", "the provider's base address (required), e.g. http://127.0.0.1:8080")
	flag.Parse()
	if *upstream == "" {
		fmt.Fprintln(os.Stderr, "bareproxy: -upstream is required")
		os.Exit(2)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	client := &http.Client{Transport: t}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The body is read whole before it is sent on, as nb reads it: a
		// body streamed from r.Body to the provider races the answer,
		// since net/http's server closes r.Body once the handler writes
		// its response, and the transport, still writing the request
		// body when the provider's first bytes come back, then closes
		// the provider's connection ("use of closed network connection"
		// in the middle of the stream).
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, *upstream+r.URL.Path, bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req.Header.Set("Content-Type", r.Header.Get("Content-Type"))
		resp, err := client.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		f, _ := w.(http.Flusher)
		buf := make([]byte, 32<<10)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				w.Write(buf[:n]) //nolint:errcheck // the client left
				if f != nil {
					f.Flush()
				}
			}
			if err != nil {
				if err != io.EOF {
					log.Printf("bareproxy: %s: %v", r.URL.Path, err)
				}
				return
			}
		}
	})
	fmt.Println("http://" + *listen)
	log.Fatal(http.ListenAndServe(*listen, h))
}
