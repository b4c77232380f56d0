// Command agentload measures nb's agent protocol server: many concurrent
// runs, each a client-side tool round trip then a streamed step, against
// an instant local fake provider (the OpenAI fake of the tests, served in
// the server's process). It starts the server as a child process (itself,
// with -serve), so that the memory it reports is the server's alone.
//
//	go run ./bench/agentload -runs 5000 -chunks 20
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/nbots/nb/agentproto"
	"github.com/nbots/nb/agents"
	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/server/agentsrv"

	_ "github.com/nbots/nb/provider/openai"
)

var heapProfile *string

func main() {
	serve := flag.Bool("serve", false, "run the server (used by the load run itself)")
	runs := flag.Int("runs", 5000, "concurrent runs")
	chunks := flag.Int("chunks", 20, "streamed chunks in the step after the tool call")
	dials := flag.Int("dials", 100, "connections being opened at once")
	serial := flag.Int("serial", 300, "runs one at a time, for the latency without load")
	heapProfile = flag.String("heapprofile", "", "write the server's heap profile, taken while the runs wait, to this file")
	flag.Parse()
	if *serve {
		server(*chunks)
		return
	}
	load(*runs, *dials, *serial)
}

// server serves the agent Bench and /debug/mem until stdin closes.
func server(chunks int) {
	words := make([]string, chunks)
	for i := range words {
		words[i] = "word" + strconv.Itoa(i) + " "
	}
	fake := openaitest.New(func(t providertest.Turn) providertest.Reply {
		if t.Last().Role == "tool" {
			return providertest.Reply{Chunks: words}
		}
		return providertest.Reply{Calls: []providertest.Call{{ID: "call_1", Name: "clock", Arguments: "{}"}}}
	})
	fake.Recorder = nil
	fake.SplitBytes = 1 << 20
	model := listen(fake)
	src := fmt.Sprintf("meta: {name: Bench}\nsafety: {tools: {confirmable: false}}\nprovider:\n  id: openai\n  credentials: {address: %s, access-token: k}\n  settings: {model: gpt-4o}\n", model)
	c, err := cartridge.Parse([]byte(src), "bench.yml", cartridge.FormatYAML, nil)
	if err != nil {
		log.Fatal(err)
	}
	// Many runs at once: keep as many idle connections to the provider
	// as there are runs (the default keeps 2 per host).
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 10000, 10000
	b, err := bot.New(context.Background(), c, bot.Host{HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		log.Fatal(err)
	}
	a, err := agents.FromCartridge(b)
	if err != nil {
		log.Fatal(err)
	}
	set, _ := agents.NewSet(a)
	mux := http.NewServeMux()
	(&agentsrv.Handler{Runtime: agents.New(set), Rate: 1000, Burst: 1000}).Register(mux)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.Handle("GET /debug/pprof/goroutine", pprof.Handler("goroutine"))
	mux.Handle("GET /debug/pprof/heap", pprof.Handler("heap"))
	mux.HandleFunc("GET /debug/mem", func(w http.ResponseWriter, r *http.Request) {
		// The idle connections to the fake provider are not the runs':
		// close them (and the fake's ends with them) before counting.
		tr.CloseIdleConnections()
		time.Sleep(200 * time.Millisecond)
		// Several collections: each may halve the stacks that grew while
		// a run was busy and now sit idle, as a long-running server's
		// collections do.
		for i := 0; i < 4; i++ {
			runtime.GC()
		}
		debug.FreeOSMemory()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		json.NewEncoder(w).Encode(map[string]any{ //nolint:errcheck // bench
			"heap_inuse": m.HeapInuse, "stack_inuse": m.StackInuse, "goroutines": runtime.NumGoroutine(), "rss": rss()})
	})
	fmt.Println(listen(mux))
	os.Stdout.Sync()                     //nolint:errcheck // a pipe
	bufio.NewReader(os.Stdin).ReadByte() //nolint:errcheck // stdin closed: stop
}

func listen(h http.Handler) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	go http.Serve(ln, h) //nolint:errcheck // bench
	return "http://" + ln.Addr().String()
}

// rss is the process's resident set, in bytes.
func rss() int64 {
	data, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			kb, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

type mem struct {
	HeapInuse  int64 `json:"heap_inuse"`
	StackInuse int64 `json:"stack_inuse"`
	Goroutines int64 `json:"goroutines"`
	RSS        int64 `json:"rss"`
}

func getMem(base string) mem {
	resp, err := http.Get(base + "/debug/mem")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	var m mem
	json.NewDecoder(resp.Body).Decode(&m) //nolint:errcheck // bench
	return m
}

// result is what one run measured.
type result struct {
	started   time.Duration // run frame to run_started
	toolTurn  time.Duration // tool_result to the first chunk after it
	chunkGaps []time.Duration
	err       error
}

func load(n, dials, serial int) {
	self, _ := os.Executable()
	cmd := exec.Command(self, "-serve")
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait() //nolint:errcheck // bench
		var self syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &self) //nolint:errcheck // bench
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			fmt.Printf("CPU time: server %s user + %s system; clients %s user + %s system\n",
				tv(ru.Utime), tv(ru.Stime), tv(self.Utime), tv(self.Stime))
		}
	}()
	base, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		log.Fatal(err)
	}
	base = strings.TrimSpace(base)
	fmt.Fprintln(os.Stderr, "server:", base)
	client, _ := agentproto.NewClient(base, "")
	client.HTTPClient = &http.Client{}

	// Warm up, then the latency of one run at a time.
	var quiet []result
	for i := 0; i < serial; i++ {
		r := oneRun(client, nil, nil)
		if r.err != nil {
			log.Fatalf("serial run: %v", r.err)
		}
		quiet = append(quiet, r)
	}
	before := getMem(base)

	waiting := &sync.WaitGroup{}
	waiting.Add(n)
	release := make(chan struct{})
	results := make([]result, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, dials)
	var failed atomic.Int64
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			results[i] = oneRun(client, func() { <-sem; waiting.Done() }, release)
			if results[i].err != nil {
				failed.Add(1)
			}
		}()
	}
	waiting.Wait()
	opened := time.Since(start)
	time.Sleep(time.Second)
	idle := getMem(base)
	if *heapProfile != "" {
		resp, err := http.Get(base + "/debug/pprof/heap")
		if err == nil {
			f, _ := os.Create(*heapProfile)
			io.Copy(f, resp.Body) //nolint:errcheck // bench
			f.Close()
			resp.Body.Close()
		}
	}
	t0 := time.Now()
	close(release)
	wg.Wait()
	finished := time.Since(t0)

	var errs []string
	for _, r := range results {
		if r.err != nil && len(errs) < 5 {
			errs = append(errs, r.err.Error())
		}
	}
	perRun := func(a, b int64) string { return fmt.Sprintf("%.1f KB", float64(b-a)/float64(n)/1000) }
	fmt.Printf("runs: %d concurrent, errors: %d %v\n", n, failed.Load(), errs)
	fmt.Printf("all %d runs open and waiting for their tool result after %s; all finished %s after the results were sent (%.0f runs/s, %.0f frames/s)\n",
		n, opened.Round(time.Millisecond), finished.Round(time.Millisecond), float64(n)/finished.Seconds(), float64(n*23)/finished.Seconds())
	fmt.Printf("server memory per waiting run: heap %s, stacks %s, heap+stacks %s, RSS %s; goroutines per run %.1f\n",
		perRun(before.HeapInuse, idle.HeapInuse), perRun(before.StackInuse, idle.StackInuse),
		perRun(before.HeapInuse+before.StackInuse, idle.HeapInuse+idle.StackInuse), perRun(before.RSS, idle.RSS),
		float64(idle.Goroutines-before.Goroutines)/float64(n))
	report("one run at a time", quiet)
	report(fmt.Sprintf("%d runs at once", n), results)
}

func tv(t syscall.Timeval) time.Duration {
	return (time.Duration(t.Sec)*time.Second + time.Duration(t.Usec)*time.Microsecond).Round(10 * time.Millisecond)
}

func report(what string, rs []result) {
	var started, turn, gaps []time.Duration
	for _, r := range rs {
		if r.err != nil {
			continue
		}
		started = append(started, r.started)
		turn = append(turn, r.toolTurn)
		gaps = append(gaps, r.chunkGaps...)
	}
	fmt.Printf("%s:\n", what)
	fmt.Printf("  run -> run_started         %s\n", pct(started))
	fmt.Printf("  tool_result -> next frame  %s\n", pct(turn))
	fmt.Printf("  between streamed chunks    %s\n", pct(gaps))
}

func pct(d []time.Duration) string {
	if len(d) == 0 {
		return "-"
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	at := func(p float64) time.Duration { return d[min(len(d)-1, int(p*float64(len(d))))] }
	return fmt.Sprintf("p50 %s  p99 %s  max %s", at(0.50).Round(time.Microsecond), at(0.99).Round(time.Microsecond), d[len(d)-1].Round(time.Microsecond))
}

// oneRun runs the agent once: run, tool_call, (waiting() then wait for
// release), tool_result, the streamed step, final_result.
func oneRun(c *agentproto.Client, waiting func(), release chan struct{}) (r result) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tools := []agentproto.ToolRepr{{Name: "clock", Description: "The client's clock."}}
	t := time.Now()
	conn, err := c.Start(ctx, "Bench", &agentproto.Frame{Input: "what time is it?", Chunks: true, Tools: tools})
	if err != nil {
		if waiting != nil {
			waiting()
		}
		return result{err: err}
	}
	defer conn.Close()
	signalled := false
	defer func() {
		if waiting != nil && !signalled {
			waiting()
		}
	}()
	var sent, last time.Time
	for {
		f, err := conn.Read(ctx)
		if err != nil {
			r.err = err
			return r
		}
		now := time.Now()
		switch f.Type {
		case agentproto.TypeRunStarted:
			r.started = now.Sub(t)
		case agentproto.TypeToolCall:
			if waiting != nil {
				signalled = true
				waiting()
				<-release
			}
			sent = time.Now()
			if err := conn.ToolResult(ctx, f.ID, "12:00", false); err != nil {
				r.err = err
				return r
			}
		case agentproto.TypeStepChunk:
			if r.toolTurn == 0 {
				r.toolTurn = now.Sub(sent)
			} else {
				r.chunkGaps = append(r.chunkGaps, now.Sub(last))
			}
			last = now
		case agentproto.TypeError:
			r.err = fmt.Errorf("%s: %s", f.Code, f.Message)
			return r
		case agentproto.TypeFinalResult:
			return r
		}
	}
}
