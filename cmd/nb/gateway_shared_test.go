package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/access"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/channeltest"
	"github.com/nbots/nb/gateway/channel/telegram/botapi"
	"github.com/nbots/nb/gateway/gatewayrun"
	"github.com/nbots/nb/provider/providertest"
)

// TestGatewayReplicasOwnStateFolders: two nb gateway replicas on one NATS
// server, each with its own state folder (XDG_STATE_HOME), as on two
// machines. The first was a gateway alone before: its position file and
// its pairing file move to the bus without a replay or a lost approval. A
// code given by one replica is approved with nb gateway pair from a third
// state folder. When the receiving replica is killed with an update
// published but not yet confirmed to Telegram, the other resumes from the
// position the first saved: nothing replayed, nothing skipped.
func TestGatewayReplicasOwnStateFolders(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two nb gateway replicas")
	}
	rs := newReplicaSet(t, func(turn providertest.Turn) providertest.Reply {
		return providertest.Reply{Chunks: []string{"echo: ", turn.LastUser()}}
	}, "")
	tg := rs.tg
	// Only the owner (111) is in allowFrom: the others pair.
	var cfg map[string]any
	data, err := os.ReadFile(rs.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["channels"].(map[string]any)["telegram"].(map[string]any)["allowFrom"] = []string{"111"}
	data, _ = json.Marshal(cfg)
	if err := os.WriteFile(rs.cfg, data, 0o600); err != nil {
		t.Fatal(err)
	}
	workspace := cfg["agents"].(map[string]any)["defaults"].(map[string]any)["workspace"].(string)
	var home string
	for _, kv := range rs.env {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = v
		}
	}
	state := func(i int) string { return filepath.Join(home, fmt.Sprint("state-", i)) }
	rs.envFor = func(i int) []string { return []string{"XDG_STATE_HOME=" + state(i)} }
	files := func(i int) gatewayrun.Files {
		return gatewayrun.StateFiles(filepath.Join(state(i), "nb", "gateway"), workspace)
	}

	owner := botapi.User{ID: 111, FirstName: "owner"}
	dan := botapi.User{ID: 222, FirstName: "dan"}
	eve := botapi.User{ID: 333, FirstName: "eve"}
	// Replica 0 was the gateway alone: it had published m0 and m1 (its
	// position file says 100003: the fake numbers updates from 100001)
	// and been killed before Telegram heard so; it had paired dan.
	for i := range 3 {
		tg.Say(owner, fmt.Sprint("m", i))
	}
	pairing := files(0).Pairing
	if _, err := (&access.FilePairings{Path: pairing}).Update(t.Context(), func(b *access.Book) {
		b.Approved = append(b.Approved, access.Approval{Channel: "telegram", SenderID: "222", ChatID: "222", At: time.Now()})
	}); err != nil {
		t.Fatal(err)
	}
	cursor, err := (channel.Env{StateDir: files(0).Channels}).FileCursor("telegram")
	if err != nil {
		t.Fatal(err)
	}
	if err := cursor.Save(t.Context(), "100003"); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	waitSent := func(chat int64, n int) []botapi.Message {
		t.Helper()
		sent, err := tg.WaitSent(ctx, chat, n)
		if err != nil {
			t.Fatalf("%v\n%s", err, rs.dump())
		}
		return sent
	}
	rs.start(0)
	if got := waitSent(owner.ID, 1); got[0].Text != "echo: m2" {
		t.Fatalf("replica 0 answered %q first: the position file was not its start\n%s", got[0].Text, rs.dump())
	}
	rs.start(1)
	log0 := rs.logs[0].String()
	for _, want := range []string{"starting from the file's", "approvals imported"} {
		if !strings.Contains(log0, want) {
			t.Errorf("replica 0's log does not say %q", want)
		}
	}

	// dan, paired on replica 0 alone, is answered whichever replica runs
	// his turns.
	for i := range 4 {
		tg.Say(dan, fmt.Sprint("dan ", i))
	}
	waitSent(dan.ID, 4)

	// eve gets a code; the owner approves it from a third machine.
	tg.Say(eve, "hello")
	sent := waitSent(eve.ID, 1)
	code := regexp.MustCompile(`code is ([A-Z0-9]{4}-[A-Z0-9]{4})`).FindStringSubmatch(sent[0].Text)
	if code == nil {
		t.Fatalf("no pairing code in %q", sent[0].Text)
	}
	pair := exec.Command(rs.bin, "gateway", "pair", "--config", rs.cfg, code[1])
	pair.Env = append(rs.env, "XDG_STATE_HOME="+state(2))
	if out, err := pair.CombinedOutput(); err != nil || !strings.Contains(string(out), "paired telegram:333") {
		t.Fatalf("nb gateway pair: %v: %s", err, out)
	}
	for i := range 4 {
		tg.Say(eve, fmt.Sprint("eve ", i))
	}
	if got := waitSent(eve.ID, 5); got[4].Text != "echo: eve 3" {
		t.Fatalf("eve's last answer: %q", got[4].Text)
	}

	// Replica 0 receives. Its next getUpdates, which would confirm m3 to
	// Telegram, hangs: killed then, it has published m3 and saved the
	// position, Telegram still holds m3. (Rarely, an idle poll of one
	// second takes the hang before m3 arrives, and m3 is confirmed when
	// the hang ends: then again with the next message.)
	said := 3 + 4 + 5 // m0-m2, dan's, eve's: the fake numbers updates from 100001
	want := []string{"echo: m2"}
	for try := 0; ; try++ {
		polls := tg.Calls("getUpdates") // the one waiting included
		tg.Inject("getUpdates", channeltest.Hang)
		text := fmt.Sprint("m3", strings.Repeat("'", try))
		tg.Say(owner, text)
		said++
		want = append(want, "echo: "+text)
		waitSent(owner.ID, len(want))
		for tg.Calls("getUpdates") == polls { // the hang taken
			if ctx.Err() != nil {
				t.Fatalf("replica 0 polls no more\n%s", rs.dump())
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(100 * time.Millisecond)
		if tg.Pending() == 1 {
			break
		}
		if try == 2 {
			t.Fatalf("%d updates not confirmed, want m3's", tg.Pending())
		}
	}
	rs.kill9(0)
	m3Update := 100000 + said
	deadline := time.Now().Add(30 * time.Second)
	for tg.Pending() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("replica 1 does not receive\n%s", rs.dump())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The log line comes before the poll; the test reads it through a
	// pipe, which may lag.
	connected := regexp.MustCompile(`telegram: connected.* offset=(\d+)`)
	var m [][]string
	for m = connected.FindAllStringSubmatch(rs.logs[1].String(), -1); len(m) == 0 && time.Now().Before(deadline); m = connected.FindAllStringSubmatch(rs.logs[1].String(), -1) {
		time.Sleep(20 * time.Millisecond)
	}
	if len(m) == 0 || m[len(m)-1][1] != fmt.Sprint(m3Update+1) {
		t.Fatalf("replica 1 resumed from %v, want %d (after m3)\n%s", m, m3Update+1, rs.dump())
	}
	tg.Say(owner, "m4")
	want = append(want, "echo: m4")
	waitSent(owner.ID, len(want))
	time.Sleep(time.Second) // a replayed update would be answered now
	var got []string
	for _, m := range tg.Sent(owner.ID) {
		got = append(got, m.Text)
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("the owner got %q\n%s", got, rs.dump())
	}
}
