package gatewayrun

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/nbots/nb/gateway/web"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/openai/openaitest"
)

// The long run of TestMemoryFlat happens in a child process (this test
// binary run again with flatChildEnv set), so that no other test's heap
// is counted and the figures are those of one gateway.
const flatChildEnv = "NB_TEST_MEMORY_FLAT_CHILD"

// TestMemoryFlat holds the gateway's memory flat (issue 36): a child
// process opens a whole gateway (the web chat, the bus, the turn loop,
// sessions in files) against an instant fake model and runs turns
// through /ws over many chats, twice, then as many chats again as a
// half has turns, each touched once with a 4 KiB message (sessions that
// go idle). The heap after a collection must not grow past a bound
// between the end of the first half and the end of the second: what a
// turn leaves behind must not be kept; nor, from a reading just before
// the chats touched once to one after, by more than a bound per chat
// well below their messages: idle sessions' messages leave memory;
// nor, over as many chats more once the open sessions are full, by more
// than a bound per chat: what every chat leaves for good is small.
//
// Under -race every turn costs several times more: the run is shorter,
// the bounds' floors the same (the old code kept about 1 KB a turn);
// the bounds that tell the duplicate windows' map and /status's map of
// every chat (about 100 and 140 bytes a turn or chat more) bite only
// without -race, in CI's plain run.
func TestMemoryFlat(t *testing.T) {
	if os.Getenv(flatChildEnv) != "" {
		t.Skip("the child runs TestMemoryFlatChild")
	}
	if testing.Short() {
		t.Skip("a long run")
	}
	chats, turns := 60, 1200
	if raceEnabled {
		chats, turns = 20, 300
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestMemoryFlatChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), flatChildEnv+"="+strconv.Itoa(chats)+","+strconv.Itoa(turns))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child failed: %v\n%s", err, out)
	}
	figures, tookText := map[string]int64{}, ""
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if took, ok := strings.CutPrefix(line, "flat-took: "); ok {
			tookText = took
		}
		if rest, ok := strings.CutPrefix(line, "flat: "); ok {
			for _, kv := range strings.Fields(rest) {
				k, v, _ := strings.Cut(kv, "=")
				n, err := strconv.ParseInt(v, 10, 64)
				if err == nil {
					figures[k] = n
				}
			}
		}
	}
	first, second, warmed, idle, more := figures["heap1"], figures["heap2"], figures["heap2b"], figures["heap3"], figures["heap4"]
	if first == 0 || second == 0 || warmed == 0 || idle == 0 || more == 0 {
		t.Fatalf("no figures in the child's output:\n%s", out)
	}
	t.Logf("%d chats, %d turns a half: live heap %d KB after the first half, %d KB after the second, %d KB before and %d KB after %d chats more, touched once each with %d-byte messages, %d KB after %d more (%s)",
		chats, turns, first>>10, second>>10, warmed>>10, idle>>10, turns, idleMessage, more>>10, turns, tookText)
	// What a turn leaves behind for good: a few dozen bytes (the
	// duplicate windows filling, up to their size: 16 bytes a key in
	// bus.Window's index, three keys a turn; 40-45 bytes a key in the Go
	// map it had, 100-140 KB over these 1,200 turns); the sessions'
	// messages were about 700 bytes a turn, kept for as long as the
	// session was open.
	if bound := max(80<<10, 64*int64(turns)); second-first > bound {
		t.Errorf("the live heap grew by %d KB between the first %d turns over %d chats and the next %d (bound %d KB): something is kept for each turn",
			(second-first)>>10, turns, chats, turns, bound>>10)
	}
	// What a chat leaves behind: its place in the web chat's list and
	// the budgets' counts, the open sessions (up to flatMaxOpen, without
	// their messages: about 900 bytes each) and the warm ones' messages
	// (up to KeepBytes in all). Each of those chats' two messages is
	// idleMessage bytes long, so a chat whose messages stayed in memory
	// would cost more than twice that: the bound per chat is far less
	// than one message.
	if bound := flatKeepBytes + flatMaxOpen<<10 + 160*int64(turns); idle-warmed > bound {
		t.Errorf("the live heap grew by %d KB after %d more chats touched once each with two %d-byte messages (bound %d KB): idle sessions' messages stay in memory",
			(idle-warmed)>>10, turns, idleMessage, bound>>10)
	}
	// What a chat leaves for good, once the open sessions are full: its
	// place in the web chat's list (about 50 bytes), the budget's count
	// of the day (about 90), the duplicate windows' keys; not a map entry
	// of /status's (maxContexts), not 40-45 bytes a key in the windows,
	// not a socket's map left at its largest. The old code kept about
	// 250 bytes a chat, this one about 110.
	if bound := max(32<<10, 176*int64(turns)); more-idle > bound {
		t.Errorf("the live heap grew by %d KB after %d more chats touched once each, past the %d open sessions (bound %d KB, %d bytes a chat): something is kept for every chat",
			(more-idle)>>10, turns, flatMaxOpen, bound>>10, bound/int64(turns))
	}
}

// flatKeepBytes and flatMaxOpen are the child's session.Manager
// KeepBytes and MaxOpen, and idleMessage how long the messages of the
// chats touched once are.
const (
	flatKeepBytes = 64 << 10
	flatMaxOpen   = 200
	idleMessage   = 4 << 10
)

// TestMemoryFlatChild is TestMemoryFlat's child: it prints the live
// heap after each half, and before and after the chats touched once,
// as "flat: heap1=… heap2=… heap2b=… heap3=…". Set
// NB_TEST_MEMORY_FLAT_PROFILE to a path to write the heap profiles of
// those three moments to path.1, path.2 and path.3 (then compare them
// with go tool pprof -base).
func TestMemoryFlatChild(t *testing.T) {
	spec := os.Getenv(flatChildEnv)
	if spec == "" {
		t.Skip("run by TestMemoryFlat")
	}
	profile := os.Getenv("NB_TEST_MEMORY_FLAT_PROFILE")
	if profile != "" {
		runtime.MemProfileRate = 512
	}
	a, b, _ := strings.Cut(spec, ",")
	chats, _ := strconv.Atoi(a)
	turns, _ := strconv.Atoi(b)
	ctx := t.Context()
	// The warm sessions' messages fill their 64 KiB in the first half
	// (1 MiB by default would take more turns than a test can run).
	// The open sessions are bounded at flatMaxOpen so that the last
	// chats (d…) come past the bound: what they leave is what grows
	// with every chat for good.
	_, url := startEchoGateway(t, func(gw *Gateway) {
		gw.Sessions.KeepBytes = flatKeepBytes
		gw.Sessions.MaxOpen = flatMaxOpen
	})
	profiles := 0
	heap := func() uint64 {
		// The least of three readings a little apart: a buffer a
		// background read holds at one moment is not kept.
		// The providers' pooled connections go first: how many a
		// burst left idle (each with a 64 KiB buffer) is chance, not
		// something a turn keeps.
		provider.CloseIdleConnections()
		var least uint64
		for i := range 3 {
			time.Sleep(50 * time.Millisecond)
			var ms runtime.MemStats
			runtime.GC()
			runtime.GC()
			runtime.ReadMemStats(&ms)
			if i == 0 || ms.HeapAlloc < least {
				least = ms.HeapAlloc
			}
		}
		if profile != "" {
			profiles++
			if f, err := os.Create(fmt.Sprint(profile, ".", profiles)); err == nil {
				pprof.Lookup("heap").WriteTo(f, 0) //nolint:errcheck // a diagnosis
				f.Close()
			}
		}
		return least
	}
	start := time.Now()
	// Half 1: turns over chats (turns/chats each); half 2 the same
	// again on the same chats; then turns chats more, one turn each.
	flatTurns(t, ctx, url, "a", chats, turns, 0)
	h1 := heap()
	flatTurns(t, ctx, url, "a", chats, turns, 0)
	h2 := heap()
	// The chats touched once: their paths warmed first (the heap read
	// after, as the baseline), then as many as the turns of a half, each
	// with a long message.
	flatTurns(t, ctx, url, "b", turns/10, turns/10, idleMessage)
	h2b := heap()
	flatTurns(t, ctx, url, "c", turns, turns, idleMessage)
	h3 := heap()
	flatTurns(t, ctx, url, "d", turns, turns, 0)
	h4 := heap()
	fmt.Printf("flat: heap1=%d heap2=%d heap2b=%d heap3=%d heap4=%d\nflat-took: %v\n", h1, h2, h2b, h3, h4, time.Since(start).Round(time.Millisecond))
}

// flatTurns runs turns through the web chat at url over chats chats
// (named prefix0…), each on its own socket, each sending its next
// message when the previous one is answered; each message is padded to
// size bytes at least.
func flatTurns(t *testing.T, ctx context.Context, url, prefix string, chats, turns, size int) {
	t.Helper()
	const sockets = 20 // at most, each running its share of the chats in turn
	var wg sync.WaitGroup
	errs := make(chan error, sockets)
	for s := range min(sockets, chats) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(url, "http")+"/ws", &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {url}}})
			if err != nil {
				errs <- err
				return
			}
			defer ws.CloseNow()
			ws.SetReadLimit(1 << 20)
			for i := s; i < turns; i += min(sockets, chats) {
				chat := fmt.Sprintf("%s%d", prefix, i%chats)
				msg := fmt.Sprintf("%s turn %d", chat, i)
				if len(msg) < size {
					msg += " " + strings.Repeat("x", size-len(msg)-1)
				}
				if err := wsjson.Write(ctx, ws, web.Frame{Type: "message", ChatID: chat, Content: msg}); err != nil {
					errs <- err
					return
				}
				for {
					var f web.Frame
					if err := wsjson.Read(ctx, ws, &f); err != nil {
						errs <- err
						return
					}
					if f.Type == "error" {
						errs <- fmt.Errorf("%s: error frame: %s", chat, f.Content)
						return
					}
					if f.Type == "message" && f.ChatID == chat {
						if f.Content != "echo: "+msg {
							errs <- fmt.Errorf("%s: answered %q, want %q", chat, f.Content, "echo: "+msg)
							return
						}
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// startEchoGateway opens and runs a whole gateway (the web chat on a
// loopback listener, the bus, the turn loop, sessions in files) against
// an instant fake model that echoes, tune (if not nil) changing it
// before it runs, and returns it with its URL once /ready says so. It
// stops at the end of the test.
func startEchoGateway(tb testing.TB, tune func(*Gateway)) (*Gateway, string) {
	tb.Helper()
	model := openaitest.New(echo)
	model.SplitBytes = 1 << 20
	model.Recorder = nil
	srv := httptest.NewServer(model)
	tb.Cleanup(srv.Close)
	c := testConfig(tb, srv.URL, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	o := testOptions(tb)
	o.Listeners = []net.Listener{ln}
	ctx, cancel := context.WithCancel(context.Background())
	gw, err := Open(ctx, c, o)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	if tune != nil {
		tune(gw)
	}
	done := make(chan error, 1)
	go func() { done <- gw.Run(ctx) }()
	tb.Cleanup(func() {
		cancel()
		<-done
		gw.Close()
	})
	url := "http://" + ln.Addr().String()
	for {
		resp, err := http.Get(url + "/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	return gw, url
}
