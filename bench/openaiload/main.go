// Command openaiload measures nb's OpenAI-compatible API (see
// bench/README.md, bench/openai.sh):
//
//	openaiload latency -url NB -direct FAKE -n 3000
//	    sequential chat completions, alternately through nb and to the
//	    fake provider directly: the medians and the added latency
//	openaiload streams -url NB -n 10000 -pid PID
//	    n streamed chat completions held open at once, each checked whole,
//	    with the peak RSS of the server's process
//
// URLs are the base of the API (http://127.0.0.1:3048/v1). It sends only
// to the addresses it is given, a bounded number of requests, and stops.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: openaiload latency|streams [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "latency":
		err = latency(os.Args[2:])
	case "streams":
		err = streams(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q: latency or streams", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "openaiload:", err)
		os.Exit(1)
	}
}

func client(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: conns,
		MaxIdleConns:        conns,
		DisableCompression:  true,
		IdleConnTimeout:     time.Minute,
	}}
}

// post sends body to url and returns the whole response body.
func post(ctx context.Context, c *http.Client, url, token string, body []byte) ([]byte, error) {
	return postHeaders(ctx, c, url, token, nil, body)
}

// postHeaders is post with more headers.
func postHeaders(ctx context.Context, c *http.Client, url, token string, h http.Header, body []byte) ([]byte, error) {
	resp, err := open(ctx, c, url, token, h, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// open posts body as JSON to url, with token as a bearer and the headers
// h, and returns the response if its status is 200 OK.
func open(ctx context.Context, c *http.Client, url, token string, h http.Header, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range h {
		req.Header[k] = v
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
	}
	return resp, nil
}

func chatBody(model, text string, stream bool) []byte {
	b, _ := json.Marshal(map[string]any{"model": model, "stream": stream, "messages": []any{map[string]any{"role": "user", "content": text}}})
	return b
}

// latency alternates sequential requests through nb (or each of several
// servers, -url a,b,c: two builds of nb, another gateway) and to the fake.
// With -stream, each request is streamed and the figure is the time to
// the first chunk that carries text (the first token), the rest read out.
func latency(args []string) error {
	fs := flag.NewFlagSet("latency", flag.ExitOnError)
	url := fs.String("url", "http://127.0.0.1:3048/v1", "nb's API; several, comma-separated, are measured in turn")
	direct := fs.String("direct", "", "the fake provider's API (required)")
	model := fs.String("model", "bench", "the cartridge")
	token := fs.String("token", "", "nb's token")
	n := fs.Int("n", 3000, "requests to each")
	warmup := fs.Int("warmup", 300, "requests to each before measuring")
	stream := fs.Bool("stream", false, "stream the answers and time the first token")
	var headers headerFlags
	fs.Var(&headers, "header", "`Name: value` sent to the -url servers (repeatable; Portkey's x-portkey-*)")
	fs.Parse(args) //nolint:errcheck // ExitOnError
	if *direct == "" {
		return errors.New("-direct is required")
	}
	urls := strings.Split(*url, ",")
	c := client(4)
	ctx := context.Background()
	nbBody := chatBody(*model, "hi", *stream)
	fakeBody := chatBody("bench", "hi", *stream)
	via := make([][]time.Duration, len(urls))
	diffs := make([][]time.Duration, len(urls))
	var toFake []time.Duration
	send := func(u, token string, h http.Header, body []byte) (time.Duration, error) {
		t0 := time.Now()
		if *stream {
			return firstToken(ctx, c, u+"/chat/completions", token, h, body, t0)
		}
		_, err := postHeaders(ctx, c, u+"/chat/completions", token, h, body)
		return time.Since(t0), err
	}
	for i := range *warmup + *n {
		var took []time.Duration
		for _, u := range urls {
			d, err := send(u, *token, http.Header(headers), nbBody)
			if err != nil {
				return fmt.Errorf("%s: %w", u, err)
			}
			took = append(took, d)
		}
		d, err := send(*direct, "", nil, fakeBody)
		if err != nil {
			return fmt.Errorf("fake: %w", err)
		}
		if i >= *warmup {
			toFake = append(toFake, d)
			for j := range urls {
				via[j] = append(via[j], took[j])
				diffs[j] = append(diffs[j], took[j]-d)
			}
		}
	}
	med := func(d []time.Duration) time.Duration {
		d = slices.Clone(d)
		slices.Sort(d)
		return d[len(d)/2]
	}
	pct := func(d []time.Duration, p float64) time.Duration {
		d = slices.Clone(d)
		slices.Sort(d)
		return d[int(float64(len(d)-1)*p)]
	}
	what := "whole answers"
	if *stream {
		what = "streamed, time to the first token"
	}
	fmt.Printf("requests: %d each, sequential, alternating, %s\n", *n, what)
	fmt.Printf("fake directly:   median %v  p90 %v  p99 %v\n", med(toFake), pct(toFake, .9), pct(toFake, .99))
	for j, u := range urls {
		fmt.Printf("through %s: median %v  p90 %v  p99 %v\n", u, med(via[j]), pct(via[j], .9), pct(via[j], .99))
		fmt.Printf("  added:         median of differences %v (difference of medians %v)\n", med(diffs[j]), med(via[j])-med(toFake))
	}
	return nil
}

// headerFlags collects -header "Name: value".
type headerFlags http.Header

func (h *headerFlags) String() string { return "" }

func (h *headerFlags) Set(v string) error {
	k, val, ok := strings.Cut(v, ":")
	if !ok {
		return fmt.Errorf("%q: want Name: value", v)
	}
	if *h == nil {
		*h = headerFlags{}
	}
	http.Header(*h).Add(strings.TrimSpace(k), strings.TrimSpace(val))
	return nil
}

// firstToken posts a streamed request and returns the time from t0 to the
// first event with text, then reads the stream to its end.
func firstToken(ctx context.Context, c *http.Client, url, token string, h http.Header, body []byte, t0 time.Time) (time.Duration, error) {
	resp, err := open(ctx, c, url, token, h, body)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var first time.Duration
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadSlice('\n')
		if first == 0 && bytes.HasPrefix(line, []byte("data: ")) && hasText(line) {
			first = time.Since(t0)
		}
		if err == io.EOF {
			break
		}
		if err != nil && err != bufio.ErrBufferFull {
			return 0, err
		}
	}
	if first == 0 {
		return 0, errors.New("no text in the stream")
	}
	return first, nil
}

// hasText reports whether an event's line carries text: a "content"
// that is not empty (the role chunk that opens a stream has
// "content":"", and is not the first token).
func hasText(line []byte) bool {
	key := []byte(`"content":"`)
	for {
		i := bytes.Index(line, key)
		if i < 0 {
			return false
		}
		line = line[i+len(key):]
		if len(line) > 0 && line[0] != '"' {
			return true
		}
	}
}

// streams holds n streamed requests open at once.
func streams(args []string) error {
	fs := flag.NewFlagSet("streams", flag.ExitOnError)
	url := fs.String("url", "http://127.0.0.1:3048/v1", "nb's API")
	model := fs.String("model", "bench-slow", "a cartridge whose provider streams slowly")
	token := fs.String("token", "", "nb's token")
	n := fs.Int("n", 10000, "streams")
	ramp := fs.Duration("ramp", 10*time.Second, "time over which the streams are opened")
	want := fs.String("want", "", "the text every stream must deliver (default: not checked)")
	pid := fs.Int("pid", 0, "the server's process, whose RSS is sampled")
	timeout := fs.Duration("timeout", 5*time.Minute, "the whole run's limit")
	fs.Parse(args) //nolint:errcheck // ExitOnError
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	c := client(*n)
	var open, maxOpen, done, failed atomic.Int64
	var firstErr atomic.Value
	var peakRSS, peakFDs atomic.Int64
	stopSampling := make(chan struct{})
	var sampler sync.WaitGroup
	if *pid > 0 {
		sampler.Add(1)
		go func() {
			defer sampler.Done()
			t := time.NewTicker(100 * time.Millisecond)
			defer t.Stop()
			for {
				if rss := readRSS(*pid); rss > peakRSS.Load() {
					peakRSS.Store(rss)
				}
				if fds := countFDs(*pid); fds > peakFDs.Load() {
					peakFDs.Store(fds)
				}
				select {
				case <-stopSampling:
					return
				case <-t.C:
				}
			}
		}()
	}
	body := chatBody(*model, "stream", true)
	var wg sync.WaitGroup
	launch := func(opened func()) {
		defer wg.Done()
		err := oneStream(ctx, c, *url+"/chat/completions", *token, body, *want, func() {
			for o := open.Add(1); ; {
				m := maxOpen.Load()
				if o <= m || maxOpen.CompareAndSwap(m, o) {
					break
				}
			}
			opened()
		})
		open.Add(-1)
		if err != nil {
			failed.Add(1)
			firstErr.CompareAndSwap(nil, err)
			return
		}
		done.Add(1)
	}
	// One stream first, alone: nb's connection to the provider is open
	// before the others come, as on a server that has been running.
	warm := make(chan struct{})
	var once sync.Once
	wg.Add(1)
	go launch(func() { once.Do(func() { close(warm) }) })
	select {
	case <-warm:
	case <-ctx.Done():
	}
	start := time.Now()
	for i := range *n - 1 {
		if d := time.Duration(int64(*ramp) * int64(i) / int64(*n)); time.Since(start) < d {
			time.Sleep(d - time.Since(start))
		}
		wg.Add(1)
		go launch(func() {})
	}
	wg.Wait()
	close(stopSampling)
	sampler.Wait()
	fmt.Printf("streams: %d, completed whole: %d, failed: %d, most open at once: %d, in %v\n", *n, done.Load(), failed.Load(), maxOpen.Load(), time.Since(start).Round(time.Millisecond))
	if *pid > 0 {
		fmt.Printf("server: peak RSS %.1f MB (VmHWM %.1f MB), peak open files %d\n", float64(peakRSS.Load())/1e6, float64(readHWM(*pid))/1e6, peakFDs.Load())
	}
	if err, _ := firstErr.Load().(error); err != nil {
		return fmt.Errorf("first failure: %w", err)
	}
	return nil
}

// oneStream reads one streamed answer whole; opened is called at its
// first chunk.
func oneStream(ctx context.Context, c *http.Client, url, token string, body []byte, want string, opened func()) error {
	resp, err := open(ctx, c, url, token, nil, body)
	opened()
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var text strings.Builder
	finished := false
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			finished = true
			break
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &chunk); err != nil {
			return fmt.Errorf("bad chunk %.100q: %v", line, err)
		}
		if chunk.Error != nil {
			return errors.New(chunk.Error.Message)
		}
		for _, ch := range chunk.Choices {
			text.WriteString(ch.Delta.Content)
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if !finished {
		return errors.New("the stream ended without [DONE]")
	}
	if want != "" && text.String() != want {
		return fmt.Errorf("streamed %.60q..., want %.60q...", text.String(), want)
	}
	return nil
}

// readRSS is the resident set of pid in bytes, from /proc.
func readRSS(pid int) int64 { return procStatus(pid, "VmRSS:") }

// readHWM is the peak resident set of pid in bytes, from /proc.
func readHWM(pid int) int64 { return procStatus(pid, "VmHWM:") }

func procStatus(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func countFDs(pid int) int64 {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0
	}
	return int64(len(entries))
}
