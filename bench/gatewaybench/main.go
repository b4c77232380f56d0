// Command gatewaybench measures nb gateway against an instant local fake
// model (the OpenAI fake of the tests, in this process, counting its
// requests): the time from exec to an open port, idle memory, turns
// through the web chat's websocket with many sessions (rate, latency,
// order per session), memory after many turns, and model calls while
// idle. It prints the figures that go in bench/README.md.
//
//	go run ./bench/gatewaybench -nb bench/out/nb
package main

import (
	"context"
	"flag"
	"fmt"
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
	nb := flag.String("nb", "bench/out/nb", "the nb binary")
	starts := flag.Int("starts", 20, "gateway starts timed")
	sessions := flag.Int("sessions", 100, "websocket sessions")
	turns := flag.Int("turns", 10000, "turns per phase (two phases)")
	idle := flag.Duration("idle", 10*time.Second, "idle time before the idle memory is read")
	flag.Parse()

	var calls atomic.Int64
	fake := openaitest.New(func(t providertest.Turn) providertest.Reply {
		calls.Add(1)
		return providertest.Reply{Chunks: []string{"echo: ", t.LastUser()}}
	})
	fake.SplitBytes = 1 << 20 // one write per frame: an instant model
	fake.Recorder = nil       // keeps no request bodies
	srv := httptest.NewServer(fake)
	defer srv.Close()

	home, err := os.MkdirTemp("", "gatewaybench")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(home)
	env := []string{"HOME=" + home, "XDG_CONFIG_HOME=" + home + "/config", "XDG_DATA_HOME=" + home + "/data", "XDG_STATE_HOME=" + home + "/state",
		"PATH=" + os.Getenv("PATH"), "OPENAI_API_ADDRESS=" + srv.URL, "OPENAI_API_KEY=k", "NB_DOTENV=0"}

	// Port open after exec.
	var opens []time.Duration
	for range *starts {
		port := freePort()
		cmd := exec.Command(*nb, "gateway", "--listen", "127.0.0.1:"+port, "--log-level", "error")
		cmd.Env, cmd.Dir = env, home
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
	slices.Sort(opens)
	fmt.Printf("port open after exec: median %v, min %v, max %v (%d starts)\n", opens[len(opens)/2].Round(time.Microsecond*100), opens[0].Round(time.Microsecond*100), opens[len(opens)-1].Round(time.Microsecond*100), len(opens))

	// One gateway for the rest.
	port := freePort()
	cmd := exec.Command(*nb, "gateway", "--listen", "127.0.0.1:"+port, "--log-level", "error")
	cmd.Env, cmd.Dir, cmd.Stderr = env, home, os.Stderr
	if err := cmd.Start(); err != nil {
		log.Fatal(err)
	}
	defer func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() }()
	base := "http://127.0.0.1:" + port
	for {
		if r, err := http.Get(base + "/health"); err == nil {
			r.Body.Close()
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(*idle)
	rss, anon := memory(cmd.Process.Pid)
	fmt.Printf("idle %v after start, web chat on: RSS %.1f MB (anonymous %.1f MB); model calls while idle: %d\n", *idle, rss, anon, calls.Load())

	for phase := 1; phase <= 2; phase++ {
		cpu0 := cpuTime(cmd.Process.Pid)
		n, p50, p99, took, bad := turnsThroughWS(base, *sessions, *turns)
		cpu := cpuTime(cmd.Process.Pid) - cpu0
		rss, anon := memory(cmd.Process.Pid)
		fmt.Printf("phase %d: %d turns through /ws over %d sessions in %v: %.0f turns/s, p50 %v, p99 %v, %d out of order; nb's CPU %v a turn; RSS after: %.1f MB (anonymous %.1f MB)\n",
			phase, n, *sessions, took.Round(time.Millisecond), float64(n)/took.Seconds(), p50, p99, bad, (cpu / time.Duration(n)).Round(time.Microsecond), rss, anon)
	}
	sessionsDir := filepath.Join(home, "data", "nb", "gateway", "sessions")
	files, _ := filepath.Glob(filepath.Join(sessionsDir, "web_*.jsonl"))
	fmt.Printf("session files: %d; model calls in all: %d\n", len(files), calls.Load())
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

// memory reads VmRSS and RssAnon of pid, in MB.
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

// turnsThroughWS runs total turns over n sessions, each session on its
// own socket sending its next message when the previous one is answered.
func turnsThroughWS(base string, n, total int) (done int, p50, p99, took time.Duration, outOfOrder int) {
	ctx := context.Background()
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	var bad atomic.Int64
	chat := strconv.FormatInt(time.Now().UnixNano(), 36)
	start := time.Now()
	for s := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws", nil)
			if err != nil {
				log.Fatal(err)
			}
			defer ws.CloseNow()
			id := fmt.Sprintf("b%s-%d", chat, s)
			mine := total / n
			for i := range mine {
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
					if f.Type != "message" {
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
