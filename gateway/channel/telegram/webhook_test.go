package telegram

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/channeltest"
	"github.com/nbots/nb/gateway/channel/telegram/botapi"
	"github.com/nbots/nb/gateway/channel/telegram/telegramtest"
)

const hookSecret = "hook_SECRET-0123456789abcdef"

// startHook runs a channel that receives by webhook, served at its path
// by a listener of its own (the gateway's, in nb gateway).
func startHook(t *testing.T, fake *telegramtest.Server, env channel.Env) *harness {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	env = channeltest.Folders(t, env)
	c, logs := newChannel(t, fake, env, Config{WebhookURL: "http://" + ln.Addr().String() + "/telegram/hook", WebhookSecret: hookSecret})
	mux := http.NewServeMux()
	mux.Handle("POST "+c.WebhookPath(), c)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	t.Cleanup(func() { srv.Close() })
	t.Cleanup(func() {
		if strings.Contains(logs.String(), hookSecret) {
			t.Errorf("the webhook secret is in the logs:\n%s", logs)
		}
	})
	h := &harness{fake: fake, ch: c, in: &channeltest.Inbox{}, logs: logs, env: env}
	h.stop = channeltest.Start(t, c, h.in)
	return h
}

func TestWebhookConversation(t *testing.T) {
	fake := newFake(t)
	h := startHook(t, fake, channel.Env{})
	if got := fake.Webhook(); got != h.ch.cfg.WebhookURL || h.ch.WebhookPath() != "/telegram/hook" {
		t.Fatalf("webhook %q, path %q", got, h.ch.WebhookPath())
	}
	h.in.Refuse(2) // the bus is down for a moment: Telegram must deliver again
	fake.Say(alice, "hello by webhook")
	fake.Say(bob, "second")
	got := h.in.Wait(t, 2)
	if got[0].Content != "hello by webhook" || got[0].SenderID != "42|alice" || got[1].Content != "second" {
		t.Errorf("published %+v", got)
	}
	if calls, refused := fake.WebhookCalls(); refused < 2 || calls < 3 {
		t.Errorf("%d deliveries, %d refused: the failures were not answered non-2xx", calls, refused)
	}
	send(t, h.ch, bus.Outbound{ChatID: "42", Content: "answer"})
	if s := fake.Sent(42); len(s) != 1 {
		t.Errorf("sent %+v", s)
	}
	if n := fake.Calls("getUpdates"); n != 0 {
		t.Errorf("%d getUpdates calls while receiving by webhook", n)
	}
	time.Sleep(100 * time.Millisecond)
	if len(h.in.Messages()) != 2 || fake.Pending() != 0 {
		t.Errorf("%d published, %d pending", len(h.in.Messages()), fake.Pending())
	}
}

func TestWebhookRefusesForgeries(t *testing.T) {
	fake := newFake(t)
	h := startHook(t, fake, channel.Env{})
	fake.Say(alice, "real")
	first := h.in.Wait(t, 1)[0]
	forged, _ := json.Marshal(botapi.Update{UpdateID: 999_999, Message: &botapi.Message{MessageID: 77, From: &alice, Chat: botapi.Chat{ID: 42, Type: botapi.Private}, Text: "forged"}})
	for _, secret := range []string{"", "wrong_secret-0123456789", hookSecret + "x"} {
		if code, err := fake.PostRaw(secret, forged); err != nil || code != http.StatusUnauthorized {
			t.Errorf("secret %q: %d %v", secret, code, err)
		}
	}
	// Telegram delivering an update again (its answer lost) publishes
	// nothing new.
	again, _ := json.Marshal(botapi.Update{UpdateID: 100_001, Message: &botapi.Message{MessageID: 1, From: &alice, Chat: botapi.Chat{ID: 42, Type: botapi.Private}, Text: "real"}})
	if code, err := fake.PostRaw(hookSecret, again); err != nil || code != http.StatusOK {
		t.Errorf("a repeated update: %d %v", code, err)
	}
	time.Sleep(100 * time.Millisecond)
	if got := h.in.Messages(); len(got) != 1 || got[0].ID != first.ID {
		t.Errorf("published %+v", got)
	}
	if !strings.Contains(h.logs.String(), "without the secret refused") {
		t.Error("forgeries are not logged")
	}
}

func TestWebhookRestartLosesNothing(t *testing.T) {
	fake := newFake(t)
	env := channel.Env{Workspace: t.TempDir(), StateDir: t.TempDir()}
	h := startHook(t, fake, env)
	fake.Say(alice, "one")
	h.in.Wait(t, 1)
	h.stop()
	fake.Say(alice, "two") // while the gateway is down: refused, kept by Telegram
	time.Sleep(50 * time.Millisecond)
	h2 := startHook(t, fake, env)
	got := h2.in.Wait(t, 1)
	time.Sleep(100 * time.Millisecond)
	if got = h2.in.Messages(); len(got) != 1 || got[0].Content != "two" {
		t.Errorf("after the restart: %+v", got)
	}
}

func TestPollingDeletesAnOldWebhook(t *testing.T) {
	fake := newFake(t)
	h := startHook(t, fake, channel.Env{})
	h.stop()
	p := start(t, fake, channel.Env{}, Config{})
	fake.Say(alice, "polled")
	if got := p.in.Wait(t, 1); got[0].Content != "polled" {
		t.Errorf("published %+v", got)
	}
	if fake.Webhook() != "" || fake.Calls("deleteWebhook") != 1 {
		t.Errorf("webhook %q, %d deleteWebhook calls", fake.Webhook(), fake.Calls("deleteWebhook"))
	}
}

func TestWebhookConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Token: "t", WebhookSecret: hookSecret}, "webhookSecret is set without webhookUrl"},
		{Config{Token: "t", WebhookURL: "http://bot.example.com/tg", WebhookSecret: hookSecret}, "must be https"},
		{Config{Token: "t", WebhookURL: "https://bot.example.com/", WebhookSecret: hookSecret}, "a path of its own"},
		{Config{Token: "t", WebhookURL: "https://bot.example.com/ws", WebhookSecret: hookSecret}, "a path of its own"},
		{Config{Token: "t", WebhookURL: "https://bot.example.com/tg?x=1", WebhookSecret: hookSecret}, "without query"},
		{Config{Token: "t", WebhookURL: "https://bot.example.com/tg"}, "webhookSecret must be 16 to 256"},
		{Config{Token: "t", WebhookURL: "https://bot.example.com/tg", WebhookSecret: "short"}, "webhookSecret must be 16 to 256"},
	} {
		if _, err := New(c.cfg, channel.Env{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.cfg, err, c.want)
		}
	}
	if _, err := New(Config{Token: "t", WebhookURL: "https://bot.example.com/telegram/x1", WebhookSecret: hookSecret}, channel.Env{}); err != nil {
		t.Errorf("a good webhook: %v", err)
	}
}
