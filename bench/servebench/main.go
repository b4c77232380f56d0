// Command servebench measures nb serve as the editor plugins use it: the
// latency of stream polls sent at a fixed rate by one client, and the
// memory of the server with many cartridges loaded. It starts the OpenAI
// fake of the tests in-process, writes the cartridges to a temporary
// folder, runs the nb binary it is given as `nb serve`, and prints the
// figures.
//
//	go build -o bench/out/nb ./cmd/nb && go run ./bench/servebench -nb bench/out/nb
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

func main() {
	nb := flag.String("nb", "bench/out/nb", "the nb binary")
	carts := flag.Int("cartridges", 50, "cartridges in the served folder")
	rate := flag.Int("rate", 700, "polls per second from the one client")
	dur := flag.Duration("duration", 10*time.Second, "how long each poll run lasts")
	flag.Parse()

	// The provider streams a 10-byte chunk every 10 ms: the polled stream
	// grows for the whole run.
	fake := openaitest.New(func(t providertest.Turn) providertest.Reply {
		if t.LastUser() == "quick" {
			return providertest.Reply{Chunks: []string{"done"}}
		}
		n := int(*dur/(10*time.Millisecond)) + 200
		r := providertest.Reply{Chunks: make([]string, n), Delay: 10 * time.Millisecond}
		for i := range r.Chunks {
			r.Chunks[i] = "0123456789"
		}
		return r
	})
	fake.Recorder = nil
	fakeSrv := httptest.NewServer(fake)
	defer fakeSrv.Close()

	dir, err := os.MkdirTemp("", "servebench-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	for i := range *carts {
		src := fmt.Sprintf(`meta: {symbol: 🤖, name: Bot %02d, author: Bench, version: 1.0.0, description: bench cartridge}
behaviors: {interaction: {directive: You are bot %d.}}
interfaces: {repl: {prompt: [{text: '%02d', color: blue}, {text: '> '}]}}
provider: {id: openai, credentials: {address: ENV/OPENAI_API_ADDRESS, access-token: ENV/OPENAI_API_KEY}, settings: {model: gpt-4o}}
tools:
  - name: add
    description: Adds two numbers.
    parameters: {type: object, properties: {a: {type: number}, b: {type: number}}, required: [a, b]}
    lua: return a + b
`, i, i, i)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("bot%02d.yml", i)), []byte(src), 0o644); err != nil {
			log.Fatal(err)
		}
	}

	fmt.Printf("nb serve with %d cartridges\n", *carts)
	for _, hold := range []string{"0", "250ms"} {
		fmt.Printf("\n== --poll-hold %s\n", hold)
		srv := start(*nb, dir, fakeSrv.URL, hold)
		if hold == "0" {
			fmt.Printf("RSS after start: %s\n", srv.rss())
		}
		for _, fresh := range []bool{false, true} {
			how := "one kept-alive connection (VS Code)"
			if fresh {
				how = "a new connection per poll (Sublime Text)"
			}
			id := srv.stream("long")
			if hold == "0" {
				fmt.Printf("%d polls/s for %v of a growing stream, %s: %s\n", *rate, *dur, how, srv.poll(id, *rate, *dur, fresh))
			} else {
				fmt.Printf("polls in a tight loop for %v of a growing stream, %s: %s\n", *dur, how, srv.poll(id, 0, *dur, fresh))
			}
		}
		if hold == "0" {
			id := srv.stream("quick")
			time.Sleep(200 * time.Millisecond)
			fmt.Printf("%d polls/s for %v of a finished stream, a new connection per poll: %s\n", *rate, *dur, srv.poll(id, *rate, *dur, true))
			fmt.Printf("RSS after the polls: %s\n", srv.rss())
		}
		srv.stop()
	}
}

type server struct {
	cmd *exec.Cmd
	url string
}

func start(nb, dir, provider, hold string) *server {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	home, _ := os.MkdirTemp("", "servebench-home-")
	cmd := exec.Command(nb, "serve", "--listen", addr, "--poll-hold", hold, "--log-level", "warn", dir)
	cmd.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "OPENAI_API_ADDRESS=" + provider, "OPENAI_API_KEY=sk-bench"}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	s := &server{cmd: cmd, url: "http://" + addr}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if resp, err := http.Get(s.url + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			log.Fatal("nb serve did not start")
		}
	}
	return s
}

func (s *server) stop() {
	s.cmd.Process.Signal(os.Interrupt) //nolint:errcheck // bench
	s.cmd.Wait()                       //nolint:errcheck // bench
}

// rss is the server's resident memory now and at its peak.
func (s *server) rss() string {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	vals := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok {
			vals[k] = strings.TrimSpace(v)
		}
	}
	return fmt.Sprintf("%s (peak %s)", mb(vals["VmRSS"]), mb(vals["VmHWM"]))
}

func mb(kb string) string {
	n, _ := strconv.Atoi(strings.TrimSuffix(kb, " kB"))
	return fmt.Sprintf("%.1f MB", float64(n)/1024)
}

func (s *server) stream(input string) string {
	resp, err := http.Post(s.url+"/cartridges/stream", "application/json", strings.NewReader(`{"cartridge":"bot07","state":"-","input":"`+input+`"}`))
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || m.ID == "" {
		log.Fatalf("no stream: %v", err)
	}
	return m.ID
}

// poll sends GET /cartridges/stream/id at rate per second (0: as fast as
// answers come) for d, and reports the answers' latencies.
func (s *server) poll(id string, rate int, d time.Duration, fresh bool) string {
	tr := &http.Transport{DisableKeepAlives: fresh, MaxIdleConnsPerHost: 1}
	client := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	var lat []time.Duration
	var interval time.Duration
	if rate > 0 {
		interval = time.Second / time.Duration(rate)
	}
	start := time.Now()
	next := start
	errs, bytes := 0, 0
	for time.Since(start) < d {
		if interval > 0 {
			if wait := time.Until(next); wait > 0 {
				time.Sleep(wait)
			}
			next = next.Add(interval)
		}
		t0 := time.Now()
		resp, err := client.Get(s.url + "/cartridges/stream/" + id)
		if err != nil {
			errs++
			continue
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		lat = append(lat, time.Since(t0))
		bytes += int(n)
		if resp.StatusCode != 200 {
			errs++
		}
	}
	elapsed := time.Since(start)
	if len(lat) == 0 {
		return fmt.Sprintf("no answer (%d errors)", errs)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) string {
		return fmt.Sprintf("%.2f ms", float64(lat[int(p*float64(len(lat)-1))])/1e6)
	}
	return fmt.Sprintf("%d polls (%.0f/s), p50 %s, p90 %s, p99 %s, max %s, %d errors, %.1f KB per answer",
		len(lat), float64(len(lat))/elapsed.Seconds(), q(0.5), q(0.9), q(0.99), q(1), errs, float64(bytes)/float64(len(lat))/1024)
}
