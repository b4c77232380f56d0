package matrix

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/channeltest"
	"github.com/nbots/nb/gateway/channel/matrix/matrixtest"
	"github.com/nbots/nb/internal/testbuf"
)

const token = "syt_bmI_secretTOKENvalue_0xAbCd"

const (
	alice = "@alice:fake.test"
	bob   = "@bob:fake.test"
	carol = "@carol:fake.test"
)

type harness struct {
	fake *matrixtest.Server
	ch   *Channel
	in   *channeltest.Inbox
	logs *testbuf.Buffer
	env  channel.Env
	stop func()
}

func newFake(t *testing.T) *matrixtest.Server {
	t.Helper()
	f, err := matrixtest.New(token)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

func newChannel(t *testing.T, fake *matrixtest.Server, env channel.Env, cfg Config) (*Channel, *testbuf.Buffer) {
	t.Helper()
	var logs *testbuf.Buffer
	env.Logger, logs = channeltest.Logger(t, "secretTOKEN")
	if cfg.AccessToken == "" {
		cfg.AccessToken = token
	}
	if cfg.AllowFrom == nil {
		cfg.AllowFrom = []string{alice}
	}
	cfg.Homeserver = fake.URL
	if cfg.PollTimeout == 0 {
		cfg.PollTimeout = 1
	}
	c, err := New(cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	c.retryBase, c.retryMax = time.Millisecond, 5*time.Millisecond
	c.requestTimeout = 5 * time.Second
	c.pollDeadline = 1500 * time.Millisecond
	return c, logs
}

// start runs a channel on fake with a fresh workspace and state folder
// (or env's).
func start(t *testing.T, fake *matrixtest.Server, env channel.Env, cfg Config) *harness {
	t.Helper()
	env = channeltest.Folders(t, env)
	c, logs := newChannel(t, fake, env, cfg)
	h := &harness{fake: fake, ch: c, in: &channeltest.Inbox{}, logs: logs, env: env}
	h.stop = channeltest.Start(t, c, h.in)
	return h
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// direct makes user open a direct chat with the bot and waits until the
// bot joined.
func direct(t *testing.T, fake *matrixtest.Server, user string) string {
	t.Helper()
	room := fake.DirectRoom(user)
	waitFor(t, "the bot to join "+user+"'s room", func() bool { return fake.Joined(room) })
	return room
}

func send(t *testing.T, c *Channel, m bus.Outbound) string {
	t.Helper()
	return channeltest.Send(t, c, m)
}

func TestConversation(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, Config{})
	room := direct(t, fake, alice)
	fake.Say(room, alice, "hello bot")
	m := h.in.Wait(t, 1)[0]
	if m.Channel != "matrix" || m.SenderID != alice || m.ChatID != room || m.Content != "hello bot" || !strings.HasPrefix(m.ID, "$") {
		t.Errorf("inbound %+v", m)
	}
	if m.Metadata["group"] != false || m.Metadata["mentioned"] != true {
		t.Errorf("a direct chat is addressed to the bot: %v", m.Metadata)
	}
	id := send(t, h.ch, bus.Outbound{ChatID: room, Content: "Hello, **Alice**!"})
	sent := fake.Sent(room)
	if len(sent) != 1 || sent[0].EventID != id {
		t.Fatalf("sent %+v, id %q", sent, id)
	}
	c := sent[0].Content
	if sent[0].Type != "m.room.message" || c["msgtype"] != "m.text" || c["body"] != "Hello, **Alice**!" ||
		c["format"] != "org.matrix.custom.html" || c["formatted_body"] != "Hello, <strong>Alice</strong>!" {
		t.Errorf("the answer's content: %v", c)
	}
	// The bot's own message comes back in the next sync: not published.
	fake.Say(room, alice, "thanks")
	h.in.Wait(t, 2)
	time.Sleep(100 * time.Millisecond)
	if got := h.in.Messages(); len(got) != 2 || got[1].Content != "thanks" {
		t.Errorf("published %+v", got)
	}
	if !strings.Contains(h.logs.String(), "end-to-end encryption is not supported") {
		t.Errorf("no start-up word about encryption:\n%s", h.logs)
	}
}

func TestInvitations(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, Config{AllowFrom: []string{"matrix:" + alice}})
	fromBob := fake.DirectRoom(bob)
	fromAlice := direct(t, fake, alice)
	time.Sleep(100 * time.Millisecond)
	if fake.Joined(fromBob) {
		t.Error("joined a room someone not in allowFrom invited it to")
	}
	if !strings.Contains(h.logs.String(), "invitation not accepted") {
		t.Errorf("the refused invitation is not logged:\n%s", h.logs)
	}
	// Someone unknown writing in a room the bot is in reaches the gateway,
	// which refuses or pairs them.
	fake.Join(fromAlice, bob)
	fake.Say(fromAlice, bob, "who are you?")
	if m := h.in.Wait(t, 1)[0]; m.SenderID != bob {
		t.Errorf("published %+v", m)
	}
}

func TestRoomMentionRule(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, Config{})
	room := fake.CreateRoom(alice, matrixtest.RoomOptions{Members: []string{bob, carol}})
	fake.Invite(room, alice, fake.Bot)
	waitFor(t, "the join", func() bool { return fake.Joined(room) })
	cases := []struct {
		name    string
		content map[string]any
		want    bool
	}{
		{"chatter", map[string]any{"msgtype": "m.text", "body": "lunch?"}, false},
		{"intentional mention", map[string]any{"msgtype": "m.text", "body": "nb: what time is it", "m.mentions": map[string]any{"user_ids": []any{fake.Bot}}}, true},
		{"mentions someone else", map[string]any{"msgtype": "m.text", "body": "carol: what time", "m.mentions": map[string]any{"user_ids": []any{carol}}}, false},
		{"names the bot but m.mentions says no one", map[string]any{"msgtype": "m.text", "body": "@nb:fake.test was wrong", "m.mentions": map[string]any{}}, false},
		{"legacy pill", map[string]any{"msgtype": "m.text", "body": "nb: hi", "format": "org.matrix.custom.html", "formatted_body": `<a href="https://matrix.to/#/@nb:fake.test">nb</a>: hi`}, true},
		{"legacy MXID in the body", map[string]any{"msgtype": "m.text", "body": "@nb:fake.test hi"}, true},
		{"@room (allowRoomMentions off)", map[string]any{"msgtype": "m.text", "body": "@room meeting", "m.mentions": map[string]any{"room": true}}, false},
	}
	for _, c := range cases {
		fake.Post(room, alice, "m.room.message", c.content)
	}
	got := h.in.Wait(t, len(cases))
	for i, c := range cases {
		if got[i].Metadata["group"] != true || got[i].Metadata["mentioned"] != c.want {
			t.Errorf("%s: metadata %v, want mentioned=%v", c.name, got[i].Metadata, c.want)
		}
	}
	// A notice (another bot's voice) is not carried.
	fake.Post(room, bob, "m.room.message", map[string]any{"msgtype": "m.notice", "body": "@nb:fake.test build passed"})
	fake.Say(room, bob, "last")
	if got := h.in.Wait(t, len(cases)+1); got[len(cases)].Content != "last" {
		t.Errorf("a notice was published: %+v", got[len(cases)])
	}
}

func TestGroupPolicies(t *testing.T) {
	fake := newFake(t)
	rooms := map[string]string{}
	for _, n := range []string{"listed", "other"} {
		rooms[n] = fake.CreateRoom(alice, matrixtest.RoomOptions{Members: []string{bob}})
	}
	h := start(t, fake, channel.Env{}, Config{GroupPolicy: "allowlist", GroupAllowFrom: []string{rooms["listed"]}, AllowRoomMentions: true})
	for _, r := range rooms {
		fake.Invite(r, alice, fake.Bot)
		waitFor(t, "the join", func() bool { return fake.Joined(r) })
	}
	fake.Say(rooms["listed"], alice, "no mention needed here")
	fake.Post(rooms["other"], alice, "m.room.message", map[string]any{"msgtype": "m.text", "body": "@room anyone?", "m.mentions": map[string]any{"room": true}})
	got := h.in.Wait(t, 2)
	if got[0].Metadata["mentioned"] != true || got[1].Metadata["mentioned"] != false {
		t.Errorf("allowlist: %v / %v", got[0].Metadata, got[1].Metadata)
	}
	h.stop()
	h2 := start(t, fake, channel.Env{}, Config{AllowRoomMentions: true})
	fake.Post(rooms["other"], alice, "m.room.message", map[string]any{"msgtype": "m.text", "body": "@room anyone?", "m.mentions": map[string]any{"room": true}})
	if m := h2.in.Wait(t, 1)[0]; m.Metadata["mentioned"] != true {
		t.Errorf("allowRoomMentions: %v", m.Metadata)
	}
}

func TestFirstStartSkipsHistory(t *testing.T) {
	fake := newFake(t)
	room := fake.DirectRoom(alice)
	env := channel.Env{Workspace: t.TempDir(), StateDir: t.TempDir()}
	h := start(t, fake, env, Config{})
	waitFor(t, "the join", func() bool { return fake.Joined(room) })
	h.stop()
	fake.Say(room, alice, "while it was down") // after the first start: answered
	h2 := start(t, fake, env, Config{})
	fake.Say(room, alice, "now")
	got := h2.in.Wait(t, 2)
	if got[0].Content != "while it was down" || got[1].Content != "now" {
		t.Errorf("published %+v", got)
	}
	// A fresh state folder is a first start: the room's history is not
	// a queue of questions.
	h2.stop()
	h3 := start(t, fake, channel.Env{}, Config{})
	fake.Say(room, alice, "after a fresh start")
	if got := h3.in.Wait(t, 1); len(got) != 1 || got[0].Content != "after a fresh start" {
		t.Errorf("published %+v", got)
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(h3.in.Messages()); n != 1 {
		t.Errorf("%d messages after a first start, want only the new one", n)
	}
}

func TestHundredDisconnectsLoseNothing(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, Config{})
	room := direct(t, fake, alice)
	var faults []channeltest.Fault
	for i := range 100 {
		switch {
		case i%20 == 7:
			faults = append(faults, channeltest.Hang) // 5 syncs that hang past their deadline
		case i == 50:
			faults = append(faults, channeltest.TooMany)
		case i%2 == 0:
			faults = append(faults, channeltest.Reset)
		default:
			faults = append(faults, channeltest.BadGateway)
		}
	}
	fake.Inject("sync", faults...)
	const n = 60
	go func() {
		for i := range n {
			fake.Say(room, alice, fmt.Sprintf("message %02d", i))
			time.Sleep(5 * time.Millisecond)
		}
	}()
	h.in.Wait(t, n)
	time.Sleep(200 * time.Millisecond)
	got := h.in.Messages()
	if len(got) != n {
		t.Errorf("%d messages published, want %d exactly once", len(got), n)
	}
	for i, m := range got {
		if want := fmt.Sprintf("message %02d", i); m.Content != want {
			t.Fatalf("message %d is %q, want %q (lost or out of order)", i, m.Content, want)
		}
	}
	if fake.Calls("sync") < 100 {
		t.Errorf("only %d syncs: the faults were not all met", fake.Calls("sync"))
	}
}

func TestRestartNeitherReplaysNorSkips(t *testing.T) {
	fake := newFake(t)
	env := channel.Env{Workspace: t.TempDir(), StateDir: t.TempDir()}
	h := start(t, fake, env, Config{})
	room := direct(t, fake, alice)
	h.in.Refuse(2) // the bus is down for a moment: the token must not move past
	fake.Say(room, alice, "one")
	fake.Say(room, alice, "two")
	h.in.Wait(t, 2)
	h.stop()
	// While the gateway is down, more than one sync's timeline holds.
	var want []string
	for i := range timelineLimit + 25 {
		want = append(want, fmt.Sprintf("down %03d", i))
		fake.Say(room, alice, want[i])
	}
	h2 := start(t, fake, env, Config{})
	h2.in.Wait(t, len(want))
	time.Sleep(300 * time.Millisecond)
	got := h2.in.Messages()
	if len(got) != len(want) {
		t.Fatalf("%d messages after the restart, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].Content != want[i] {
			t.Fatalf("message %d is %q, want %q", i, got[i].Content, want[i])
		}
	}
	if fake.Calls("messages") == 0 {
		t.Error("the limited timeline's gap was not filled from /messages")
	}
	b, err := os.ReadFile(filepath.Join(env.StateDir, "matrix.cursor"))
	if err != nil || !strings.HasPrefix(string(b), "s") {
		t.Errorf("since file %q, %v", b, err)
	}
}

func TestRetryAfterPerRoom(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, Config{AllowFrom: []string{"*"}})
	a := direct(t, fake, alice)
	b := direct(t, fake, bob)
	fake.Limit(a, 1, 1200*time.Millisecond)
	_, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: a, Content: "one"})
	var ra *channel.RetryAfter
	if !errors.As(err, &ra) || ra.After != 1200*time.Millisecond || !strings.Contains(err.Error(), "M_LIMIT_EXCEEDED") {
		t.Fatalf("a 429: %v", err)
	}
	t0 := time.Now()
	send(t, h.ch, bus.Outbound{ChatID: b, Content: "other room"})
	if d := time.Since(t0); d > 300*time.Millisecond {
		t.Errorf("another room waited %s", d)
	}
	send(t, h.ch, bus.Outbound{ChatID: a, Content: "one"})
	if d := time.Since(t0); d < time.Second {
		t.Errorf("the limited room was sent to after %s, before its retry_after_ms", d)
	}
	if s := fake.Texts(a); len(s) != 1 || s[0] != "one" {
		t.Errorf("sent %q", s)
	}
}

func TestLostAnswerNotSentTwice(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, Config{})
	room := direct(t, fake, alice)
	long := strings.Repeat("a line of text\n", 1200) // 18,000 characters: three messages
	fake.Inject("send", channeltest.Reset, channeltest.LoseAnswer)
	m := bus.Outbound{Kind: bus.Message, ChatID: room, Turn: "t1", Content: long}
	for range 2 {
		if _, err := h.ch.Send(context.Background(), m); err == nil {
			t.Fatal("no error on a lost answer")
		}
	}
	send(t, h.ch, m)
	texts := fake.Texts(room)
	if len(texts) != 3 || strings.Join(texts, "\n") != strings.TrimSpace(long) {
		t.Errorf("%d messages after the retries: a piece was sent twice or lost", len(texts))
	}
}

func TestProgressEditedInPlace(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, Config{})
	room := direct(t, fake, alice)
	p1 := send(t, h.ch, bus.Outbound{Kind: bus.Progress, ChatID: room, Turn: "t1", Content: "Thinking"})
	p2 := send(t, h.ch, bus.Outbound{Kind: bus.Progress, ChatID: room, Turn: "t1", Content: "Thinking about it"})
	final := send(t, h.ch, bus.Outbound{ChatID: room, Turn: "t1", Content: "The **answer**"})
	if p1 != p2 || final != p1 {
		t.Errorf("ids %s %s %s", p1, p2, final)
	}
	if texts := fake.Texts(room); len(texts) != 1 || texts[0] != "The **answer**" {
		t.Fatalf("shown %q", texts)
	}
	last := fake.Sent(room)[2].Content
	rel, _ := last["m.relates_to"].(map[string]any)
	nc, _ := last["m.new_content"].(map[string]any)
	if rel["rel_type"] != "m.replace" || rel["event_id"] != p1 || last["body"] != "* The **answer**" || nc["formatted_body"] != "The <strong>answer</strong>" {
		t.Errorf("the edit: %v", last)
	}
	if err := h.ch.Typing(context.Background(), room); err != nil || fake.Calls("typing") != 1 {
		t.Errorf("Typing: %v", err)
	}
}

func TestEncryptedRoomsNotRead(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, Config{})
	room := fake.CreateRoom(alice, matrixtest.RoomOptions{Encrypted: true})
	fake.Invite(room, alice, fake.Bot)
	waitFor(t, "the join", func() bool { return fake.Joined(room) })
	for range 2 {
		fake.Post(room, alice, "m.room.encrypted", map[string]any{"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "AwgAEn...", "session_id": "x", "sender_key": "y", "device_id": "Z"})
	}
	plain := direct(t, fake, alice)
	fake.Say(plain, alice, "plain")
	if got := h.in.Wait(t, 1); got[0].Content != "plain" {
		t.Errorf("published %+v", got)
	}
	logs := h.logs.String()
	if !strings.Contains(logs, "invited to an end-to-end encrypted room") || strings.Count(logs, "encrypted message cannot be read") != 1 {
		t.Errorf("the encrypted room is not reported once:\n%s", logs)
	}
}

func TestMediaFetchedIntoWorkspace(t *testing.T) {
	fake := newFake(t)
	ws := t.TempDir()
	h := start(t, fake, channel.Env{Workspace: ws}, Config{MaxMediaBytes: 1000})
	room := direct(t, fake, alice)
	img := fake.AddMedia([]byte("PNG-bytes"))
	big := fake.AddMedia(make([]byte, 1001))
	fake.Post(room, alice, "m.room.message", map[string]any{"msgtype": "m.image", "body": "look at this", "filename": "cat.png", "url": img, "info": map[string]any{"mimetype": "image/png", "size": 9}})
	fake.Post(room, alice, "m.room.message", map[string]any{"msgtype": "m.file", "body": "big.pdf", "url": big, "info": map[string]any{"size": 5}}) // the size announced is wrong
	fake.Post(room, alice, "m.room.message", map[string]any{"msgtype": "m.file", "body": "big.pdf", "url": big, "info": map[string]any{"size": 1001}})
	got := h.in.Wait(t, 3)
	if len(got[0].Media) != 1 {
		t.Fatalf("media %v", got[0])
	}
	p := got[0].Media[0]
	if !strings.HasPrefix(p, filepath.Join(ws, "media", "matrix")+string(filepath.Separator)) || filepath.Ext(p) != ".png" {
		t.Errorf("stored as %s", p)
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "PNG-bytes" {
		t.Errorf("stored %q, %v", b, err)
	}
	if !strings.HasPrefix(got[0].Content, "look at this\n[image: ") {
		t.Errorf("content %q", got[0].Content)
	}
	for _, m := range got[1:] {
		if len(m.Media) != 0 || !strings.Contains(m.Content, "[file not received:") || !strings.Contains(m.Content, "maxMediaBytes") {
			t.Errorf("an oversized file: %+v", m)
		}
	}
	if n := fake.Calls("download"); n != 1+1 {
		t.Errorf("%d downloads: the file announced too big must not be fetched", n)
	}
}

func TestMediaThroughGuard(t *testing.T) {
	fake := newFake(t)
	c, _ := newChannel(t, fake, channel.Env{Workspace: t.TempDir()}, Config{})
	// The homeserver's host is allowed because the operator named it; the
	// same loopback server under another name is refused.
	c.base.Host = strings.Replace(c.base.Host, "127.0.0.1", "localhost", 1)
	mxc := fake.AddMedia([]byte("x"))
	msg := &messageContent{MsgType: msgImage, Body: "x.png", URL: mxc}
	_, err := c.fetch(context.Background(), &clientEvent{ID: "$x"}, msg)
	if err == nil || !strings.Contains(err.Error(), "only public addresses") {
		t.Fatalf("media from a loopback host not named as the homeserver: %v", err)
	}
	if strings.Contains(err.Error(), "secretTOKEN") {
		t.Errorf("the token is in the error: %v", err)
	}
}

func TestUndeliverable(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, Config{})
	room := direct(t, fake, alice)
	fake.Kick(room, alice)
	_, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: room, Content: "hi"})
	if !channel.IsUndeliverable(err) || !strings.Contains(err.Error(), "M_FORBIDDEN") {
		t.Errorf("a room the bot left: %v", err)
	}
	if _, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: "web:1", Content: "hi"}); !channel.IsUndeliverable(err) {
		t.Errorf("not a room id: %v", err)
	}
}

func TestTokenNeverPrinted(t *testing.T) {
	fake := newFake(t)
	c, logs := newChannel(t, fake, channel.Env{Workspace: t.TempDir(), StateDir: t.TempDir()}, Config{})
	fake.Close()
	_, err := c.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: "!r:fake.test", Content: "hi"})
	if err == nil || strings.Contains(err.Error(), "secretTOKEN") {
		t.Errorf("Send: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := c.Run(ctx, &channeltest.Inbox{}, func() {}); err != nil {
		t.Errorf("Run with an unreachable server: %v", err)
	}
	if !strings.Contains(logs.String(), "matrix: connecting") {
		t.Errorf("the failures are not logged:\n%s", logs)
	}
	if strings.Contains(logs.String(), "secretTOKEN") {
		t.Errorf("the token is in the logs:\n%s", logs)
	}
}

func TestRefusedTokenIsFinal(t *testing.T) {
	fake := newFake(t)
	c, _ := newChannel(t, fake, channel.Env{Workspace: t.TempDir(), StateDir: t.TempDir()}, Config{AccessToken: "syt_revoked_secret"})
	err := c.Run(context.Background(), &channeltest.Inbox{}, func() { t.Error("ready with a refused token") })
	if err == nil || !strings.Contains(err.Error(), "M_UNKNOWN_TOKEN") || !strings.Contains(err.Error(), "channels.matrix.accessToken") || strings.Contains(err.Error(), "revoked_secret") {
		t.Errorf("Run: %v", err)
	}
	c2, _ := newChannel(t, fake, channel.Env{Workspace: t.TempDir(), StateDir: t.TempDir()}, Config{UserID: "@other:fake.test"})
	if err := c2.Run(context.Background(), &channeltest.Inbox{}, func() {}); err == nil || !strings.Contains(err.Error(), "channels.matrix.userId") {
		t.Errorf("another account's token: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "channels.matrix.accessToken is empty"},
		{Config{AccessToken: "a b"}, "not an access token"},
		{Config{AccessToken: "t", Homeserver: "ftp://x"}, "channels.matrix.homeserver"},
		{Config{AccessToken: "t", UserID: "alice"}, "channels.matrix.userId"},
		{Config{AccessToken: "t", GroupPolicy: "all"}, "channels.matrix.groupPolicy"},
	} {
		if _, err := New(c.cfg, channel.Env{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
}

func TestFilesSent(t *testing.T) {
	fake := newFake(t)
	h := start(t, fake, channel.Env{}, Config{})
	room := direct(t, fake, alice)
	ws := h.env.Workspace
	os.WriteFile(filepath.Join(ws, "chart.png"), []byte("\x89PNG\r\n\x1a\nchart"), 0o600)
	os.WriteFile(filepath.Join(ws, "report.pdf"), []byte("%PDF-1.4"), 0o600)
	send(t, h.ch, bus.Outbound{ChatID: room, Turn: "t1", Content: "Here.", Media: []string{"chart.png", "report.pdf", "/etc/hostname"}})
	sent := fake.Sent(room)
	if len(sent) != 3 {
		t.Fatalf("sent %+v", sent)
	}
	if body, _ := sent[0].Content["body"].(string); !strings.HasPrefix(body, "Here.") || !strings.Contains(body, "(hostname not attached: outside the workspace)") {
		t.Errorf("text %q", body)
	}
	for i, want := range []struct{ msgtype, name, typ, data string }{
		{"m.image", "chart.png", "image/png", "\x89PNG\r\n\x1a\nchart"},
		{"m.file", "report.pdf", "application/pdf", "%PDF-1.4"},
	} {
		c := sent[i+1].Content
		info, _ := c["info"].(map[string]any)
		up, ok := fake.Upload(fmt.Sprint(c["url"]))
		if c["msgtype"] != want.msgtype || c["body"] != want.name || c["filename"] != want.name || info["mimetype"] != want.typ ||
			!ok || up.Name != want.name || up.Type != want.typ || string(up.Data) != want.data {
			t.Errorf("file %d: %v, upload %+v", i, c, up)
		}
	}
}
