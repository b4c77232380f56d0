package gatewaycmd

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/channel/feishu/feishutest"
)

// TestGatewayFeishu runs nb gateway from channels.feishu in a nanobot
// configuration against the Feishu fake and a fake model: an allowed
// user is answered in their chat, a stranger gets a pairing code and no
// answer from the model, and group chatter without a mention is not
// answered while a mention is.
func TestGatewayFeishu(t *testing.T) {
	const secret = "feishu-APP-secret-e2e"
	fs := feishutest.New("cli_e2e", secret)
	defer fs.Close()
	const ann, eve, grp = "ou_ann", "ou_eve", "oc_team"
	dir, cfg := echoGatewayConfig(t, fmt.Sprintf(`{"feishu": {"enabled": true, "appId": "cli_e2e", "appSecret": %q, "apiBase": %q, "allowFrom": [%q]}}`, secret, fs.URL, ann))
	runGateway(t, dir, cfg, secret)
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	waitSent := func(to string, n int) []feishutest.Message {
		t.Helper()
		if err := fs.Wait(ctx, func() bool { return len(fs.Sent(to)) >= n }); err != nil {
			t.Fatalf("no answer to %s: %v", to, err)
		}
		return fs.Sent(to)
	}
	if err := fs.Wait(ctx, func() bool { return fs.Connections() > 0 }); err != nil {
		t.Fatalf("the gateway did not connect: %v", err)
	}
	fs.Post(feishutest.Incoming{Sender: ann, Text: "hello there"})
	if got := waitSent(ann, 1); !strings.Contains(got[0].Text(), "echo: hello there") {
		t.Errorf("answer %q", got[0].Text())
	}
	fs.Post(feishutest.Incoming{Sender: eve, Text: "let me in"})
	if got := waitSent(eve, 1); strings.Contains(got[0].Text(), "echo:") || !strings.Contains(strings.ToLower(got[0].Text()), "pair") {
		t.Errorf("the stranger got %q", got[0].Text())
	}
	fs.Post(feishutest.Incoming{Sender: ann, Chat: grp, Text: "chatter"})
	fs.Post(feishutest.Incoming{Sender: ann, Chat: grp, Text: "and you?", MentionBot: true})
	got := waitSent(grp, 1)
	time.Sleep(300 * time.Millisecond)
	got = fs.Sent(grp)
	if len(got) != 1 || !strings.Contains(got[0].Text(), "and you?") || strings.Contains(got[0].Text(), "chatter") {
		t.Errorf("in the group: %+v", got)
	}
}

// TestGatewayFeishuCallback runs nb gateway with Feishu receiving by the
// HTTP event callback on the gateway's own listener: the URL check is
// answered, an event with the verification token is answered in its
// chat, one without it is refused.
func TestGatewayFeishuCallback(t *testing.T) {
	const secret, token = "feishu-APP-secret-cb", "verify-TOKEN-cb"
	fs := feishutest.New("cli_cb", secret)
	defer fs.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // the gateway listens there
	dir, cfg := echoGatewayConfig(t, fmt.Sprintf(`{"feishu": {"enabled": true, "appId": "cli_cb", "appSecret": %q, "apiBase": %q, "allowFrom": ["ou_ann"],
  "mode": "webhook", "verificationToken": %q}}`, secret, fs.URL, token))
	logs := runGatewayOn(t, dir, cfg, secret, addr)
	url := "http://" + addr + "/feishu/events"
	post := func(body string) (int, string) {
		for range 200 {
			resp, err := http.Post(url, "application/json", strings.NewReader(body))
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode != http.StatusNotFound {
					return resp.StatusCode, string(b)
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("the callback never answered\n%s", logs())
		return 0, ""
	}
	if code, body := post(`{"type":"url_verification","token":"` + token + `","challenge":"c-1"}`); code != 200 || !strings.Contains(body, "c-1") {
		t.Errorf("url_verification: %d %s", code, body)
	}
	_, ev := fs.Event(feishutest.Incoming{Sender: "ou_ann", Text: "hello by callback"}, token)
	if code, _ := post(string(ev)); code != 200 {
		t.Errorf("the event: %d", code)
	}
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	if err := fs.Wait(ctx, func() bool { return len(fs.Sent("ou_ann")) > 0 }); err != nil {
		t.Fatalf("no answer: %v\n%s", err, logs())
	}
	if got := fs.Sent("ou_ann")[0].Text(); !strings.Contains(got, "echo: hello by callback") {
		t.Errorf("answer %q", got)
	}
	_, forged := fs.Event(feishutest.Incoming{Sender: "ou_ann", Text: "forged"}, "wrong")
	if code, _ := post(string(forged)); code != 401 {
		t.Errorf("a forged event: %d", code)
	}
}
