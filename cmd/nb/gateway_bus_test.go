package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/channel/telegram/botapi"
	"github.com/nbots/nb/gateway/channel/telegram/telegramtest"
	"github.com/nbots/nb/internal/natstest"
	"github.com/nbots/nb/internal/testbuf"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

var replicaKills = flag.Int("replica-kills", 10, "how many times TestGatewayReplicasKill9 kills a replica (the issue's figure is 100)")

// replicaSet is nb gateway replicas sharing one NATS server, one
// configuration and one workspace: this test binary started as nb.
type replicaSet struct {
	t    testing.TB
	ns   *natstest.Server
	tg   *telegramtest.Server
	bin  string
	cfg  string
	env  []string
	mu   sync.Mutex
	cmds []*exec.Cmd
	logs []*testbuf.Buffer
	urls []string
	// args, when set, are replica i's own arguments (its workspace).
	args func(i int) []string
	// envFor, if set, adds to replica i's environment (its own state
	// folder, as on another machine).
	envFor func(i int) []string
}

// newReplicaSet starts the NATS server, the Telegram fake and a model
// fake answering with brain, and writes the replicas' configuration;
// busURL, if not "", is the bus URL to give them instead of the server's.
func newReplicaSet(t testing.TB, brain providertest.Brain, busURL string) *replicaSet {
	t.Helper()
	ns := natstest.Start(t)
	tg, err := telegramtest.New("123456:replicas")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tg.Close)
	model := httptest.NewServer(openaitest.New(brain))
	t.Cleanup(model.Close)
	if busURL == "" {
		busURL = ns.URL()
	}
	cfg := replicaConfig(t, tg, model.URL)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "nb")
	if err := os.Symlink(self, bin); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(cfg)
	path := filepath.Join(dir, "gateway.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	return &replicaSet{t: t, ns: ns, tg: tg, bin: bin, cfg: path, env: []string{
		"HOME=" + home, "XDG_STATE_HOME=" + filepath.Join(home, "state"), "PATH=" + os.Getenv("PATH"),
		"NB_BUS=" + busURL, "NB_DOTENV=0",
	}}
}

// start starts replica i (again) and waits until its /ready answers 200.
func (r *replicaSet) start(i int) {
	r.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	args := []string{"gateway", "--config", r.cfg, "--listen", addr, "--log-level", "debug"}
	if r.args != nil {
		args = append(args, r.args(i)...)
	}
	cmd := exec.Command(r.bin, args...)
	cmd.Env = r.env
	if r.envFor != nil {
		cmd.Env = append(slices.Clone(r.env), r.envFor(i)...)
	}
	log := &testbuf.Buffer{}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	r.mu.Lock()
	for len(r.cmds) <= i {
		r.cmds, r.logs, r.urls = append(r.cmds, nil), append(r.logs, nil), append(r.urls, "")
	}
	r.cmds[i], r.logs[i], r.urls[i] = cmd, log, "http://"+addr
	r.mu.Unlock()
	r.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() }) //nolint:errcheck // may be dead
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("replica %d not ready:\n%s", i, log.String())
		}
	}
}

// kill9 kills replica i as a crash does: no shutdown, no release.
func (r *replicaSet) kill9(i int) {
	r.mu.Lock()
	cmd := r.cmds[i]
	r.mu.Unlock()
	cmd.Process.Kill() //nolint:errcheck // dead already is fine
	cmd.Wait()         //nolint:errcheck // killed
}

func (r *replicaSet) dump() string {
	var b strings.Builder
	for i, l := range r.logs {
		fmt.Fprintf(&b, "--- replica %d ---\n%s\n", i, l.String())
	}
	return b.String()
}

// replicaConfig is a gateway on the Telegram fake and the model fake.
func replicaConfig(t testing.TB, tg *telegramtest.Server, modelURL string) map[string]any {
	return map[string]any{
		"agents":    map[string]any{"defaults": map[string]any{"workspace": filepath.Join(t.TempDir(), "workspace"), "model": "gpt-4o-mini", "provider": "custom"}},
		"providers": map[string]any{"custom": map[string]any{"apiBase": modelURL, "apiKey": "test-key"}},
		"channels": map[string]any{"sendProgress": false, "telegram": map[string]any{
			"enabled": true, "token": tg.Token, "apiBase": tg.URL, "allowFrom": []string{"*"}, "pollTimeout": 1,
		}},
		"gateway": map[string]any{"heartbeat": map[string]any{"enabled": false}},
	}
}

// TestGatewayReplicasKill9: three replicas of nb gateway share a NATS
// server and a workspace; people write to the Telegram bot while a
// random replica is killed with SIGKILL and started again, -replica-kills
// times. Every message is answered exactly once, and each chat's answers
// come in the order of its messages.
func TestGatewayReplicasKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nb gateway replicas and kills them")
	}
	replicasKill9(t, *replicaKills, nil)
}

// replicasKill9 is TestGatewayReplicasKill9 killing times times; setup, if
// not nil, shapes the replicas before they start.
func replicasKill9(t *testing.T, times int, setup func(rs *replicaSet)) {
	// A quick model, 80 ms a turn: a kill often lands
	// in the middle of a turn.
	var mu sync.Mutex
	turns := map[string]int{}
	rs := newReplicaSet(t, func(turn providertest.Turn) providertest.Reply {
		mu.Lock()
		turns[turn.LastUser()]++
		mu.Unlock()
		return providertest.Reply{Chunks: []string{"echo: ", turn.LastUser()}, Delay: 40 * time.Millisecond}
	}, "")
	tg := rs.tg
	if setup != nil {
		setup(rs)
	}
	for i := range 3 {
		rs.start(i)
	}

	const chats = 6
	users := make([]botapi.User, chats)
	for i := range users {
		users[i] = botapi.User{ID: int64(9100 + i), FirstName: fmt.Sprint("user", i)}
	}
	want := map[int64][]string{}
	messages := times * 6
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	said, answered := map[string]time.Time{}, map[string]time.Time{}
	go func() { // when each answer arrived, for the latency figures
		for ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
			for _, u := range users {
				for _, m := range tg.Sent(u.ID) {
					mu.Lock()
					if _, ok := answered[m.Text]; !ok {
						answered[m.Text] = time.Now()
					}
					mu.Unlock()
				}
			}
		}
	}()
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		for i := range messages {
			u := users[i%chats]
			text := fmt.Sprintf("m%d", i)
			want[u.ID] = append(want[u.ID], "echo: "+text)
			mu.Lock()
			said["echo: "+text] = time.Now()
			mu.Unlock()
			tg.Say(u, text)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(20+rand.IntN(30)) * time.Millisecond):
			}
		}
	}()
	var kills []time.Time
	for k := range times {
		time.Sleep(time.Duration(50+rand.IntN(250)) * time.Millisecond)
		i := rand.IntN(3)
		mu.Lock()
		kills = append(kills, time.Now())
		mu.Unlock()
		rs.kill9(i)
		t.Logf("kill %d: replica %d", k+1, i)
		rs.start(i)
	}
	<-fed
	wctx, wcancel := context.WithTimeout(ctx, 60*time.Second)
	defer wcancel()
	for _, u := range users {
		if _, err := tg.WaitSent(wctx, u.ID, len(want[u.ID])); err != nil {
			t.Fatalf("%v\n%s", err, rs.dump())
		}
	}
	time.Sleep(2 * time.Second) // a reply sent twice would come now
	// A chat platform takes no idempotency key: a reply it accepted from
	// a replica killed before that replica recorded the delivery is sent
	// again by the replica that takes over (docs/scale-out.md). Such a
	// repeat follows its first copy, which reached the platform just
	// before a kill; any other repeat, gap or reordering fails.
	mu.Lock()
	nearKill := func(at time.Time) bool {
		for _, k := range kills {
			if d := at.Sub(k); d > -100*time.Millisecond && d < 20*time.Millisecond {
				return true
			}
		}
		return false
	}
	repeats := 0
	for _, u := range users {
		var got []string
		for _, m := range tg.Sent(u.ID) {
			if n := len(got); n > 0 && got[n-1] == m.Text && nearKill(answered[m.Text]) {
				repeats++
				continue
			}
			got = append(got, m.Text)
		}
		if strings.Join(got, "|") != strings.Join(want[u.ID], "|") {
			t.Errorf("chat %d:\n got %q\nwant %q", u.ID, got, want[u.ID])
		}
	}
	mu.Unlock()
	if t.Failed() {
		t.Log(rs.dump())
	}
	mu.Lock()
	defer mu.Unlock()
	again := 0
	for _, n := range turns {
		if n > 1 {
			again++
		}
	}
	var lat []time.Duration
	for text, at := range said {
		if a, ok := answered[text]; ok {
			lat = append(lat, a.Sub(at))
		}
	}
	slices.Sort(lat)
	t.Logf("%d messages, %d kills: %d turns cut by a kill and run again; %d replies repeated (the platform had it when its replica was killed); message to answer p50 %v, p99 %v, max %v",
		messages, times, again, repeats, lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])
}

// TestGatewayReplicasCronOnce: a job every 2 seconds, three replicas,
// all of them killed and started again halfway: the job runs once per
// slot (never twice within a second of each other) and keeps running.
func TestGatewayReplicasCronOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nb gateway replicas")
	}
	var mu sync.Mutex
	var runs []time.Time
	rs := newReplicaSet(t, func(turn providertest.Turn) providertest.Reply {
		if strings.Contains(turn.LastUser(), "tick") {
			mu.Lock()
			runs = append(runs, time.Now())
			mu.Unlock()
		}
		return providertest.Reply{Chunks: []string{"done"}}
	}, "")
	add := exec.Command(rs.bin, "gateway", "cron", "add", "--config", rs.cfg, "--name", "tick", "--message", "tick", "--every", "2")
	add.Env = rs.env
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for i := range 3 {
		rs.start(i)
	}
	time.Sleep(7 * time.Second)
	for i := range 3 {
		rs.kill9(i)
	}
	for i := range 3 {
		rs.start(i)
	}
	time.Sleep(7 * time.Second)
	mu.Lock()
	defer mu.Unlock()
	if len(runs) < 5 {
		t.Fatalf("%d runs in 14 s of a job every 2 s\n%s", len(runs), rs.dump())
	}
	for i := 1; i < len(runs); i++ {
		if gap := runs[i].Sub(runs[i-1]); gap < time.Second {
			t.Fatalf("runs %d and %d %v apart: a slot ran twice\n%s", i-1, i, gap, rs.dump())
		}
	}
	t.Logf("%d runs", len(runs))
}

// TestGatewayReadyWithoutBus: /ready fails and says why while the bus is
// away, and passes again when it is back.
func TestGatewayReadyWithoutBus(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nb gateway")
	}
	rs := newReplicaSet(t, providertest.Echo, "")
	ns := rs.ns
	rs.env = append(rs.env, "NB_BUS=nats://nb:pw-secret@"+strings.TrimPrefix(ns.URL(), "nats://"))
	rs.start(0)
	ready := func() (int, string) {
		resp, err := http.Get(rs.urls[0] + "/ready")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := ready(); code != 200 || !strings.Contains(body, `"bus":"ok"`) {
		t.Fatal(code, body)
	}
	ns.Shutdown()
	ns.WaitForShutdown()
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, body := ready()
		if code == 503 {
			if !strings.Contains(body, `"bus":"nats://nb:xxxxx@127.0.0.1:`) || strings.Contains(body, "pw-secret") {
				t.Fatal(body)
			}
			t.Log(body)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("still ready without the bus:", body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ns.Restart(t)
	for deadline = time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if code, _ := ready(); code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready again after the bus came back\n%s", rs.dump())
		}
	}
	if strings.Contains(rs.dump(), "pw-secret") {
		t.Fatal("the bus password is in the log")
	}
}

// TestGatewayReplicasStop: /stop reaches the turn whichever replica runs
// it (the replica whose receive loop gets /stop may be another).
func TestGatewayReplicasStop(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nb gateway replicas")
	}
	started := make(chan bool, 4)
	rs := newReplicaSet(t, func(turn providertest.Turn) providertest.Reply {
		if turn.LastUser() == "slow" {
			started <- true
			return providertest.Reply{Chunks: slices.Repeat([]string{"."}, 80), Delay: 100 * time.Millisecond}
		}
		return providertest.Echo(turn)
	}, "")
	for i := range 3 {
		rs.start(i)
	}
	u := botapi.User{ID: 9200, FirstName: "stopper"}
	rs.tg.Say(u, "slow")
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatalf("the slow turn did not start\n%s", rs.dump())
	}
	rs.tg.Say(u, "/stop")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sent, err := rs.tg.WaitSent(ctx, u.ID, 1)
	if err != nil {
		t.Fatalf("%v\n%s", err, rs.dump())
	}
	if sent[0].Text != "⏹ Stopped 1 task(s)." {
		t.Fatalf("%q\n%s", sent[0].Text, rs.dump())
	}
}

// TestGatewayReplicasSteering: a message written while its chat's turn
// runs reaches that turn, whichever of three replicas runs it, and is
// not answered a second time by the replica the bus delivers it to.
func TestGatewayReplicasSteering(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nb gateway replicas")
	}
	started := make(chan string, 8)
	proceed := make(chan bool, 8)
	rs := newReplicaSet(t, func(turn providertest.Turn) providertest.Reply {
		var users []string
		toolRound := false
		for _, m := range turn.Messages {
			switch m.Role {
			case "user":
				users = append(users, m.Content)
			case "tool":
				toolRound = true
			}
		}
		if toolRound {
			return providertest.Reply{Chunks: []string{"saw: " + strings.Join(users, " + ")}}
		}
		if strings.HasPrefix(turn.LastUser(), "work") {
			started <- turn.LastUser()
			<-proceed
			// A round of tool calls: the turn takes what was sent
			// meanwhile before its next request.
			return providertest.Reply{Calls: []providertest.Call{{ID: "call_1", Name: "no_such_tool", Arguments: "{}"}}}
		}
		return providertest.Echo(turn)
	}, "")
	for i := range 3 {
		rs.start(i)
	}
	for n := range 3 {
		u := botapi.User{ID: int64(9300 + n), FirstName: fmt.Sprint("steerer", n)}
		work := fmt.Sprint("work ", n)
		rs.tg.Say(u, work)
		select {
		case <-started:
		case <-time.After(20 * time.Second):
			t.Fatalf("the turn did not start\n%s", rs.dump())
		}
		offered := strings.Count(rs.dump(), "message offered to the running turn")
		rs.tg.Say(u, "use metric units")
		// The offer reaches the turn's replica, whichever it is.
		for deadline := time.Now().Add(20 * time.Second); strings.Count(rs.dump(), "message offered to the running turn") == offered; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the message was not offered to the running turn\n%s", rs.dump())
			}
		}
		proceed <- true
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		sent, err := rs.tg.WaitSent(ctx, u.ID, 1)
		cancel()
		if err != nil {
			t.Fatalf("%v\n%s", err, rs.dump())
		}
		if want := "saw: " + work + " + use metric units"; sent[len(sent)-1].Text != want {
			t.Fatalf("chat %d: answer %q, want %q\n%s", n, sent[len(sent)-1].Text, want, rs.dump())
		}
		// The bus delivers the steering message after the turn: nobody
		// answers it again.
		time.Sleep(2 * time.Second)
		var texts []string
		for _, m := range rs.tg.Sent(u.ID) {
			if !strings.HasPrefix(m.Text, "no_such_tool") { // a tool hint
				texts = append(texts, m.Text)
			}
		}
		if len(texts) != 1 {
			t.Fatalf("chat %d got %q, want one answer\n%s", n, texts, rs.dump())
		}
	}
}
