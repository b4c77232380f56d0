// Command gatewaybench measures nb gateway against an instant local fake
// model (the OpenAI fake of the tests, in this process, counting its
// requests): the time from exec to an open port, idle memory, turns
// through the web chat's websocket with many sessions (rate, latency,
// order per session), memory after many turns, latency at a paced rate,
// memory after many sessions touched once each, and model calls while
// idle. It prints the figures that go in bench/README.md, each with the
// load average of the machine when it was taken. Given several binaries
// (-nb old,new), it runs each phase on each in turn, so that both see the
// same load.
//
// The fake model runs in a process of its own (this program, started
// again with -serve-fake), so that the CPU time of each of the three
// processes that share the machine is read apart: nb's, the fake's, and
// this program's (the websocket clients). Memory is read right after each
// phase and again after -settle of idleness.
//
//	go run ./bench/gatewaybench -nb bench/out/nb
package main

import (
	"bufio"
	"context"
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
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

func main() {
	nbs := flag.String("nb", "bench/out/nb", "the nb binary; several, comma-separated, are measured side by side (each phase on each in turn)")
	starts := flag.Int("starts", 20, "gateway starts timed")
	sessions := flag.Int("sessions", 100, "websocket sessions")
	turns := flag.Int("turns", 10000, "turns per phase (two phases)")
	idle := flag.Duration("idle", 10*time.Second, "idle time before the idle memory is read")
	rate := flag.Int("rate", 500, "turns a second of the paced phase (0: none)")
	paced := flag.Duration("paced", 10*time.Second, "how long the paced phase lasts")
	fresh := flag.Int("fresh", 10000, "sessions touched once each after the phases (0: none)")
	settle := flag.Duration("settle", 10*time.Second, "after each phase, how long the gateway is left idle before its memory is read a second time (0: read once)")
	serveFake := flag.Bool("serve-fake", false, "serve the fake model on a loopback port, print its address, and run until standard input closes (what gatewaybench starts itself as)")
	flag.Parse()

	if *serveFake {
		runFake()
		return
	}
	fk := startFake()
	defer fk.stop()

	var gws []*gateway
	for _, nb := range strings.Split(*nbs, ",") {
		gw := &gateway{nb: nb}
		gw.home, _ = os.MkdirTemp("", "gatewaybench")
		defer os.RemoveAll(gw.home)
		gw.env = []string{"HOME=" + gw.home, "XDG_CONFIG_HOME=" + gw.home + "/config", "XDG_DATA_HOME=" + gw.home + "/data", "XDG_STATE_HOME=" + gw.home + "/state",
			"PATH=" + os.Getenv("PATH"), "OPENAI_API_ADDRESS=" + fk.url, "OPENAI_API_KEY=k", "NB_DOTENV=0"}
		if v := os.Getenv("GODEBUG"); v != "" {
			gw.env = append(gw.env, "GODEBUG="+v)
		}
		gws = append(gws, gw)
	}
	each := func(what string, fn func(gw *gateway) string) {
		for _, gw := range gws {
			fmt.Printf("%s [%s, load %s]: %s\n", what, gw.nb, loadavg(), fn(gw))
		}
	}

	// Port open after exec.
	each("port open after exec", func(gw *gateway) string {
		var opens []time.Duration
		for range *starts {
			port := freePort()
			cmd := exec.Command(gw.nb, "gateway", "--listen", "127.0.0.1:"+port, "--log-level", "error")
			cmd.Env, cmd.Dir = gw.env, gw.home
			start := time.Now()
			if err := cmd.Start(); err != nil {
				log.Fatal(err)
			}
			for {
				c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
				if err == nil {
					c.Close()
					break
				}
				if time.Since(start) > 10*time.Second {
					log.Fatal("the gateway did not open its port in 10 s")
				}
				time.Sleep(200 * time.Microsecond)
			}
			opens = append(opens, time.Since(start))
			cmd.Process.Signal(os.Interrupt)
			cmd.Wait()
		}
		if len(opens) == 0 {
			return "not measured"
		}
		slices.Sort(opens)
		return fmt.Sprintf("median %v, min %v, max %v (%d starts)", opens[len(opens)/2].Round(time.Microsecond*100), opens[0].Round(time.Microsecond*100), opens[len(opens)-1].Round(time.Microsecond*100), len(opens))
	})

	// One gateway each for the rest.
	for _, gw := range gws {
		gw.start()
		defer gw.stop()
	}
	time.Sleep(*idle)
	each("idle "+idle.String()+" after start, web chat on", func(gw *gateway) string {
		rss, anon := memory(gw.pid())
		return fmt.Sprintf("RSS %.1f MiB (anonymous %.1f MiB); model calls while idle: %d", rss, anon, fk.calls())
	})

	chat := strconv.FormatInt(time.Now().UnixNano(), 36)
	// after reads the gateway's memory right after a phase and, with
	// -settle, again once it has been idle that long.
	after := func(gw *gateway) string {
		rss, anon := memory(gw.pid())
		out := fmt.Sprintf("RSS after: %.1f MiB (anonymous %.1f MiB)", rss, anon)
		if *settle > 0 {
			time.Sleep(*settle)
			rss, anon = memory(gw.pid())
			out += fmt.Sprintf("; after %v idle: %.1f MiB (anonymous %.1f MiB)", *settle, rss, anon)
		}
		return out
	}
	// run runs one phase's turns and measures the CPU time of the three
	// processes: nb, the fake model and this program (the clients).
	run := func(gw *gateway, total int, prefix string, rate, chats int) string {
		nb0, fake0, self0 := cpuTime(gw.pid()), cpuTime(fk.pid()), cpuTime(os.Getpid())
		cs0 := switches(gw.pid())
		n, p50, p99, took, bad := turnsThroughWS(gw.base, *sessions, total, prefix, rate, chats)
		nb, fake, self := cpuTime(gw.pid())-nb0, cpuTime(fk.pid())-fake0, cpuTime(os.Getpid())-self0
		cs := switches(gw.pid()) - cs0
		per := func(d time.Duration) time.Duration { return (d / time.Duration(n)).Round(time.Microsecond) }
		return fmt.Sprintf("%d turns over %d sessions in %v: %.0f turns/s, p50 %v, p99 %v, %d out of order; CPU a turn: nb %v, fake model %v, clients %v (%.2f cores in all); nb's context switches a turn: %.1f; %s",
			n, *sessions, took.Round(time.Millisecond), float64(n)/took.Seconds(), p50, p99, bad,
			per(nb), per(fake), per(self), (nb+fake+self).Seconds()/took.Seconds(), float64(cs)/float64(n), after(gw))
	}
	for phase := 1; phase <= 2; phase++ {
		each(fmt.Sprintf("phase %d", phase), func(gw *gateway) string {
			return run(gw, *turns, "b"+chat, 0, 0)
		})
	}
	if *rate > 0 {
		each(fmt.Sprintf("paced %d turns/s", *rate), func(gw *gateway) string {
			return run(gw, int(float64(*rate)*paced.Seconds()), "b"+chat, *rate, 0)
		})
	}
	if *fresh > 0 {
		each(fmt.Sprintf("%d sessions touched once each", *fresh), func(gw *gateway) string {
			return run(gw, *fresh, "f"+chat, 0, *fresh)
		})
	}
	each("in all", func(gw *gateway) string {
		files, _ := filepath.Glob(filepath.Join(gw.home, "data", "nb", "gateway", "sessions", "web_*.jsonl"))
		return fmt.Sprintf("session files: %d; model calls (all gateways): %d", len(files), fk.calls())
	})
}

// fake is the fake model's process.
type fake struct {
	cmd *exec.Cmd
	url string
	in  io.Closer
}

// startFake starts this program again as the fake model.
func startFake() *fake {
	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	cmd := exec.Command(self, "-serve-fake")
	cmd.Stderr = os.Stderr
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GODEBUG=") { // GODEBUG is for the gateways
			cmd.Env = append(cmd.Env, kv)
		}
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		log.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		log.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		log.Fatalf("the fake model did not start: %v", err)
	}
	return &fake{cmd: cmd, url: strings.TrimSpace(line), in: in}
}

func (f *fake) pid() int { return f.cmd.Process.Pid }

func (f *fake) stop() { f.in.Close(); f.cmd.Wait() }

// calls asks the fake how many requests it answered.
func (f *fake) calls() int64 {
	r, err := http.Get(f.url + "/calls")
	if err != nil {
		return -1
	}
	defer r.Body.Close()
	data, _ := io.ReadAll(r.Body)
	n, _ := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
	return n
}

// runFake serves the fake model (an instant echo, counting its requests;
// GET /calls says how many) until standard input closes.
func runFake() {
	var calls atomic.Int64
	model := openaitest.New(func(t providertest.Turn) providertest.Reply {
		calls.Add(1)
		return providertest.Reply{Chunks: []string{"echo: ", t.LastUser()}}
	})
	model.SplitBytes = 1 << 20 // one write per frame: an instant model
	model.Recorder = nil       // keeps no request bodies
	mux := http.NewServeMux()
	mux.HandleFunc("GET /calls", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, calls.Load()) })
	mux.Handle("/", model)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	fmt.Println(srv.URL)
	io.Copy(io.Discard, os.Stdin)
}

// gateway is one nb gateway under measure, in a home of its own.
type gateway struct {
	nb, home, base string
	env            []string
	cmd            *exec.Cmd
}

func (gw *gateway) start() {
	port := freePort()
	gw.cmd = exec.Command(gw.nb, "gateway", "--listen", "127.0.0.1:"+port, "--log-level", "error")
	gw.cmd.Env, gw.cmd.Dir, gw.cmd.Stderr = gw.env, gw.home, os.Stderr
	if err := gw.cmd.Start(); err != nil {
		log.Fatal(err)
	}
	gw.base = "http://127.0.0.1:" + port
	for {
		if r, err := http.Get(gw.base + "/health"); err == nil {
			r.Body.Close()
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (gw *gateway) stop() { gw.cmd.Process.Signal(os.Interrupt); gw.cmd.Wait() }

func (gw *gateway) pid() int { return gw.cmd.Process.Pid }

// loadavg is the machine's load average of the last minute.
func loadavg() string {
	data, _ := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(data)); len(f) > 0 {
		return f[0]
	}
	return "?"
}

func freePort() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// cpuTime is the user and system time pid used (from /proc, in ticks of
// 10 ms).
func cpuTime(pid int) time.Duration {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	s := string(data)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+2:]
	}
	f := strings.Fields(s)
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.Atoi(f[11])
	k, _ := strconv.Atoi(f[12])
	return time.Duration(u+k) * 10 * time.Millisecond
}

// switches is the number of context switches of pid's threads alive
// now (voluntary and not; those of threads that ended are lost, and the
// Go runtime keeps its threads).
func switches(pid int) int64 {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	var n int64
	for _, t := range tasks {
		data, _ := os.ReadFile(t)
		for _, line := range strings.Split(string(data), "\n") {
			if f := strings.Fields(line); len(f) == 2 && strings.HasSuffix(f[0], "ctxt_switches:") {
				v, _ := strconv.ParseInt(f[1], 10, 64)
				n += v
			}
		}
	}
	return n
}

// memory reads VmRSS and RssAnon of pid, in MiB.
func memory(pid int) (rss, anon float64) {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb / 1024
		case "RssAnon:":
			anon = kb / 1024
		}
	}
	return
}

type frame struct {
	Type    string `json:"type"`
	ChatID  string `json:"chat_id,omitempty"`
	Content string `json:"content,omitempty"`
}

// turnsThroughWS runs total turns over n sockets. With chats 0 each
// socket is a session of its own (prefix-i), sending its next message
// when the previous one is answered; with chats, socket i runs sessions
// i, i+n, … below chats in turn (each touched total/chats times). With
// rate, the turns start at that many a second in all (each socket waits
// for its own answer before its next).
func turnsThroughWS(base string, n, total int, prefix string, rate, chats int) (done int, p50, p99, took time.Duration, outOfOrder int) {
	ctx := context.Background()
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	var bad atomic.Int64
	start := time.Now()
	var every time.Duration
	if rate > 0 {
		every = time.Duration(float64(time.Second) * float64(n) / float64(rate))
	}
	for s := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Fifty sockets a source address: the gateway takes 64
			// connections of one client address (gateway.limits.clientConns).
			src := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+s/50))}
			client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: src}).DialContext}}
			ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws", &websocket.DialOptions{HTTPClient: client})
			if err != nil {
				log.Fatal(err)
			}
			defer ws.CloseNow()
			ws.SetReadLimit(1 << 20)
			mine := total / n
			next := start.Add(every * time.Duration(s) / time.Duration(n))
			for i := range mine {
				id := fmt.Sprintf("%s-%d", prefix, s)
				if chats > 0 {
					id = fmt.Sprintf("%s-%d", prefix, s+i*n)
				}
				if every > 0 {
					time.Sleep(time.Until(next))
					next = next.Add(every)
				}
				msg := fmt.Sprintf("%s #%d", id, i)
				t0 := time.Now()
				if err := wsjson.Write(ctx, ws, frame{Type: "message", ChatID: id, Content: msg}); err != nil {
					log.Fatal(err)
				}
				for {
					var f frame
					if err := wsjson.Read(ctx, ws, &f); err != nil {
						log.Fatal(err)
					}
					if f.Type == "error" {
						log.Fatalf("error frame: %s", f.Content)
					}
					if f.Type != "message" || f.ChatID != id {
						continue
					}
					if f.Content != "echo: "+msg {
						bad.Add(1)
					}
					break
				}
				d := time.Since(t0)
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	took = time.Since(start)
	slices.Sort(lat)
	return len(lat), lat[len(lat)/2].Round(time.Microsecond * 100), lat[len(lat)*99/100].Round(time.Microsecond * 100), took, int(bad.Load())
}
