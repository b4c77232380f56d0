package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/channel/telegram/botapi"
	"github.com/nbots/nb/gateway/channel/telegram/telegramtest"
	"github.com/nbots/nb/provider/providertest"
)

// The figures of bench/README.md's "Scale-out: gateway on JetStream":
//
//	go test -run XXX -bench GatewayReplicas -benchtime 1x ./cmd/nb
//
// They start nb gateway replicas (this test binary as nb) on one NATS
// server, the Telegram fake and an instant model fake.

// BenchmarkGatewayReplicasFailover kills with SIGKILL the replica that
// runs the Telegram receive loop while people keep writing (six chats, a
// message every 20 ms), five times, and reports the longest wait of a
// message for its answer (failover-s) against 45 ms of the quiet time.
func BenchmarkGatewayReplicasFailover(b *testing.B) {
	rs := newReplicaSet(b, instantEcho, "")
	tg := rs.tg
	for i := range 3 {
		rs.start(i)
	}
	var worst time.Duration
	for run := range 5 {
		leader := -1
		for deadline := time.Now().Add(10 * time.Second); leader < 0; time.Sleep(50 * time.Millisecond) {
			for i, l := range rs.logs {
				if strings.Contains(l.String(), "this replica receives") {
					leader = i
				}
			}
			if time.Now().After(deadline) {
				b.Fatalf("no replica receives\n%s", rs.dump())
			}
		}
		lat := rs.converse(b, tg, 6, 150, 20*time.Millisecond, func() { rs.kill9(leader) }, 50)
		worst = max(worst, lat[len(lat)-1])
		b.Logf("run %d: killed replica %d (the receive loop's): slowest answer %v, p50 %v", run+1, leader, lat[len(lat)-1], lat[len(lat)/2])
		rs.start(leader)
	}
	b.ReportMetric(worst.Seconds(), "failover-s")
}

// instantEcho answers at once, in one piece.
func instantEcho(turn providertest.Turn) providertest.Reply {
	return providertest.Reply{Chunks: []string{"echo: " + turn.LastUser()}}
}

// converse has chats people send n messages in all, one every gap, calls
// kill after the first killAfter, waits for every answer and returns the
// waits, sorted.
func (r *replicaSet) converse(b testing.TB, tg *telegramtest.Server, chats, n int, gap time.Duration, kill func(), killAfter int) []time.Duration {
	b.Helper()
	base := map[int64]int{}
	users := make([]botapi.User, chats)
	for i := range users {
		users[i] = botapi.User{ID: int64(9100 + i), FirstName: fmt.Sprint("user", i)}
		base[users[i].ID] = len(tg.Sent(users[i].ID))
	}
	var mu sync.Mutex
	said := map[string]time.Time{}
	answered := map[string]time.Time{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		seen := map[int64]int{}
		for ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
			for _, u := range users {
				sent := tg.Sent(u.ID)
				if len(sent) == seen[u.ID] {
					continue
				}
				for _, m := range sent[seen[u.ID]:] {
					mu.Lock()
					if _, ok := answered[m.Text]; !ok {
						answered[m.Text] = time.Now()
					}
					mu.Unlock()
				}
				seen[u.ID] = len(sent)
			}
		}
	}()
	want := map[int64]int{}
	stamp := time.Now().UnixNano()
	for i := range n {
		if i == killAfter && kill != nil {
			kill()
		}
		u := users[i%chats]
		text := fmt.Sprintf("c%d-%d", stamp, i)
		mu.Lock()
		said["echo: "+text] = time.Now()
		mu.Unlock()
		tg.Say(u, text)
		want[u.ID]++
		time.Sleep(gap)
	}
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	defer wcancel()
	for _, u := range users {
		if _, err := tg.WaitSent(wctx, u.ID, base[u.ID]+want[u.ID]); err != nil {
			b.Fatalf("%v\n%s", err, r.dump())
		}
	}
	time.Sleep(20 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	var lat []time.Duration
	for text, at := range said {
		if a, ok := answered[text]; ok {
			lat = append(lat, a.Sub(at))
		}
	}
	slices.Sort(lat)
	return lat
}

// BenchmarkGatewayReplicasThroughput is turn throughput with an instant
// model on 1, 2 and 3 replicas: 600 messages over 60 chats said at once,
// turns/s from the first message to the last answer.
func BenchmarkGatewayReplicasThroughput(b *testing.B) {
	for _, replicas := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("replicas=%d", replicas), func(b *testing.B) {
			rs := newReplicaSet(b, instantEcho, "")
			tg := rs.tg
			for i := range replicas {
				rs.start(i)
			}
			const chats, n = 60, 600
			replicaCPU0, selfCPU0 := rs.cpu(), selfCPU()
			start := time.Now()
			lat := rs.converse(b, tg, chats, n, 0, nil, 0)
			elapsed := time.Since(start)
			b.ReportMetric(float64(n)/elapsed.Seconds(), "turns/s")
			// Where the CPU goes: the replicas, and this process (the NATS
			// server, the Telegram and model fakes).
			b.ReportMetric(float64((rs.cpu()-replicaCPU0).Microseconds())/1000/n, "replica-cpu-ms/turn")
			b.ReportMetric(float64((selfCPU()-selfCPU0).Microseconds())/1000/n, "nats+fakes-cpu-ms/turn")
			b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "p99-ms")
			// How busy the machine's cores were: near 100%, turns/s is
			// bound by the CPU, before the bus or the store.
			busy := (rs.cpu() - replicaCPU0) + (selfCPU() - selfCPU0)
			b.ReportMetric(100*busy.Seconds()/(elapsed.Seconds()*float64(runtime.NumCPU())), "cpu-busy-%")
		})
	}
}

// cpu is the CPU time the running replicas used so far (/proc).
func (r *replicaSet) cpu() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	var total time.Duration
	for _, c := range r.cmds {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.Process.Pid))
		if err != nil {
			continue
		}
		// Fields after the command's closing parenthesis: utime and stime
		// are the 12th and 13th, in clock ticks (100 a second on Linux).
		f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		if len(f) < 13 {
			continue
		}
		u, _ := strconv.Atoi(f[11])
		s, _ := strconv.Atoi(f[12])
		total += time.Duration(u+s) * 10 * time.Millisecond
	}
	return total
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru) //nolint:errcheck // never fails
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
