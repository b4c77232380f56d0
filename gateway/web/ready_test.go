package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/channeltest"
	"github.com/nbots/nb/gateway/channel/telegram"
	"github.com/nbots/nb/gateway/channel/telegram/telegramtest"
	"github.com/nbots/nb/internal/httpguard"
)

// TestReadyChecks: /ready fails, naming the check and its reason, when
// a store the gateway needs cannot be reached.
func TestReadyChecks(t *testing.T) {
	var storeErr error
	s := &Server{Gateway: &gateway.Gateway{}, Checks: []httpguard.Check{{Name: "store", Run: func(context.Context) error { return storeErr }}}}
	get := func() (int, string) {
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, httptest.NewRequest("GET", "http://localhost/ready", nil))
		return w.Code, strings.TrimSpace(w.Body.String())
	}
	if code, body := get(); code != 200 || body != `{"channels":{},"checks":{"store":"ok"},"ready":true}` {
		t.Errorf("ready: %d %s", code, body)
	}
	storeErr = errors.New("PostgreSQL postgres://db/nb: reach the database: refused")
	if code, body := get(); code != 503 || body != `{"channels":{},"checks":{"store":"PostgreSQL postgres://db/nb: reach the database: refused"},"ready":false}` {
		t.Errorf("not ready: %d %s", code, body)
	}
}

// TestReadyNamesChannels: /ready answers 503 naming each channel that is
// not connected, with why: a Telegram bot whose API refuses it (502s)
// while it connects, and a configured channel this nb cannot run; 200
// once the one connects and the other is switched off.
func TestReadyNamesChannels(t *testing.T) {
	fake, err := telegramtest.New("123:secret_TOKEN")
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	fake.Inject("getMe", channeltest.BadGateway, channeltest.BadGateway)
	tg, err := telegram.New(telegram.Config{Token: "123:secret_TOKEN", APIBase: fake.URL, PollTimeout: 1}, channeltest.Folders(t, channel.Env{}))
	if err != nil {
		t.Fatal(err)
	}
	g := &gateway.Gateway{}
	s := &Server{Gateway: g}
	get := func() (int, map[string]string) {
		w := httptest.NewRecorder()
		s.Handler().ServeHTTP(w, httptest.NewRequest("GET", "http://localhost/ready", nil))
		var body struct{ Channels map[string]string }
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
			t.Fatal(err, w.Body.String())
		}
		return w.Code, body.Channels
	}
	g.Expect("telegram", "whatsapp")
	g.Connected("whatsapp", errors.New("this nb has no such channel"))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go g.RunChannel(ctx, tg)
	waitFor := func(what string, ok func(int, map[string]string) bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			code, chans := get()
			if ok(code, chans) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: /ready answers %d %v", what, code, chans)
			}
		}
	}
	waitFor("telegram refused", func(code int, chans map[string]string) bool {
		return code == 503 && strings.HasPrefix(chans["telegram"], "connecting: ") && strings.Contains(chans["telegram"], "Bad Gateway") &&
			chans["whatsapp"] == "stopped: this nb has no such channel"
	})
	waitFor("telegram connected", func(code int, chans map[string]string) bool {
		return code == 503 && chans["telegram"] == "connected"
	})
	cancel()
	g = &gateway.Gateway{}
	s.Gateway = g
	g.Expect("telegram")
	g.Disabled("whatsapp")
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	go g.RunChannel(ctx, tg)
	waitFor("all connected", func(code int, chans map[string]string) bool {
		return code == 200 && chans["telegram"] == "connected" && chans["whatsapp"] == "disabled"
	})
	if v := fmt.Sprint(get()); strings.Contains(v, "secret_TOKEN") {
		t.Error("the token is in /ready:", v)
	}
}
