package slack

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/channel/slack/slacktest"
)

// TestAPIErrors: an answer with "ok": false is an error naming the
// method and Slack's error code; a 5xx names the status (and the code
// of its body); a 429 is a *rateLimited with its Retry-After.
func TestAPIErrors(t *testing.T) {
	fake := newFake(t)
	fake.Post(slacktest.Event{Channel: "C0001", ChannelType: "channel", User: "U0001", Text: "x"})
	a := &api{base: fake.URL, bot: botToken, app: appToken, hc: &http.Client{Timeout: 10 * time.Second}}
	ctx := context.Background()

	err := a.update(ctx, "C0001", "1.000001", "x")
	var ae *apiError
	if !errors.As(err, &ae) || ae.Method != "chat.update" || ae.Code != "message_not_found" || err.Error() != "chat.update: message_not_found" {
		t.Errorf("chat.update of no message: %v", err)
	}
	if _, err := a.postMessage(ctx, "C4040", "", "x"); errorCode(err) != "channel_not_found" || !strings.HasPrefix(err.Error(), "chat.postMessage: ") {
		t.Errorf("chat.postMessage to no channel: %v", err)
	}

	fake.Fail("chat.postMessage", 1)
	_, err = a.postMessage(ctx, "C0001", "", "x")
	var he *httpError
	if !errors.As(err, &he) || he.Status != 500 || err.Error() != "chat.postMessage: HTTP 500 Internal Server Error (internal_error)" {
		t.Errorf("a 500: %v", err)
	}

	fake.RateLimit("chat.postMessage", 1, 7)
	_, err = a.postMessage(ctx, "C0001", "", "x")
	var rl *rateLimited
	if !errors.As(err, &rl) || rl.After != 7*time.Second || rl.Method != "chat.postMessage" {
		t.Errorf("a 429: %v", err)
	}

	if ts, err := a.postMessage(ctx, "C0001", "1.000002", "in a thread"); err != nil || ts == "" {
		t.Fatalf("chat.postMessage: %q %v", ts, err)
	}
	if s := fake.Sent("C0001"); len(s) != 1 || s[0].ThreadTS != "1.000002" || s[0].Text != "in a thread" {
		t.Errorf("sent %+v", s)
	}

	wrong := &api{base: fake.URL, bot: "xoxb-wrong", app: "xapp-wrong", hc: http.DefaultClient}
	if _, err := wrong.authTest(ctx); final(err) == nil || !strings.Contains(final(err).Error(), "botToken") {
		t.Errorf("auth.test with a wrong token: %v, %v", err, final(err))
	}
	if _, err := wrong.connectionsOpen(ctx); final(err) == nil || !strings.Contains(final(err).Error(), "appToken") {
		t.Errorf("apps.connections.open with a wrong token: %v, %v", err, final(err))
	}
}
