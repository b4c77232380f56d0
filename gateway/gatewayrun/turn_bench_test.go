package gatewayrun

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/nbots/nb/gateway/web"
)

// BenchmarkGatewayTurn drives turns through a whole gateway in this
// process (the web chat's /ws, the bus, the turn loop, sessions in
// files with their fsync, the agent, the HTTP request to the model and
// its stream) against the instant fake model, over 100 chats on 100
// sockets, each sending its next message when the previous one is
// answered (issue 36):
//
//	go test ./gateway/gatewayrun -run '^$' -bench GatewayTurn -benchtime 5000x -cpuprofile /tmp/turn.cpu
//
// ns/op is wall time per turn at saturation (1/throughput), allocs/op
// and B/op are the whole process's; cpu-us/turn is the process's CPU
// time (user and system, from getrusage) per turn. All three include
// the websocket clients and the fake model, which run in the same
// process: the CPU profile tells nb's share (gateway/…, agent, provider,
// bot) from theirs (openaitest, the client's goroutines).
func BenchmarkGatewayTurn(b *testing.B) {
	ctx := b.Context()
	_, url := startEchoGateway(b, nil)
	const chats = 100
	socks := make([]*websocket.Conn, chats)
	for i := range socks {
		// Fifty sockets a source address: the gateway takes 64
		// connections of one client address (gateway.limits.clientConns).
		src := &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i/50))}
		client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{LocalAddr: src}).DialContext}}
		ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http")+"/ws", &websocket.DialOptions{HTTPClient: client, HTTPHeader: http.Header{"Origin": {url}}})
		if err != nil {
			b.Fatal(err)
		}
		defer ws.CloseNow()
		ws.SetReadLimit(1 << 20)
		socks[i] = ws
	}
	// turn sends one message on chat i's socket and waits for its answer.
	turn := func(i, n int) error {
		chat := fmt.Sprintf("c%d", i)
		msg := fmt.Sprintf("%s turn %d", chat, n)
		if err := wsjson.Write(ctx, socks[i], web.Frame{Type: "message", ChatID: chat, Content: msg}); err != nil {
			return err
		}
		for {
			var f web.Frame
			if err := wsjson.Read(ctx, socks[i], &f); err != nil {
				return err
			}
			switch {
			case f.Type == "error":
				return fmt.Errorf("%s: error frame: %s", chat, f.Content)
			case f.Type == "message" && f.ChatID == chat:
				if f.Content != "echo: "+msg {
					return fmt.Errorf("%s: answered %q, want %q", chat, f.Content, "echo: "+msg)
				}
				return nil
			}
		}
	}
	// run runs n turns over the chats, closed loop.
	run := func(n int64) error {
		var next atomic.Int64
		var wg sync.WaitGroup
		errs := make(chan error, chats)
		for i := range chats {
			wg.Go(func() {
				for k := next.Add(1); k <= n; k = next.Add(1) {
					if err := turn(i, int(k)); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		return <-errs
	}
	// Every chat's session exists and holds a few turns before the
	// clock starts: the figures are those of a gateway that runs.
	// NB_BENCH_WARMUP sets how many turns in all (10 a chat by default):
	// 10000 measures what bench/gatewaybench's second phase measures,
	// sessions past the message window, consolidation due.
	warm := int64(10 * chats)
	if v, err := strconv.ParseInt(os.Getenv("NB_BENCH_WARMUP"), 10, 64); err == nil && v > 0 {
		warm = v
	}
	if err := run(warm); err != nil {
		b.Fatal(err)
	}
	before := cpuTime()
	b.ReportAllocs()
	b.ResetTimer()
	wait := burstProfile(b)
	if err := run(int64(b.N)); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	wait()
	b.ReportMetric(float64((cpuTime()-before).Microseconds())/float64(b.N), "cpu-us/turn")
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
