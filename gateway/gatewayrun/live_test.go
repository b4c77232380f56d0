package gatewayrun

import (
	"context"
	"encoding/json"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/channel/telegram/botapi"
	"github.com/nbots/nb/gateway/channel/telegram/telegramtest"
	"github.com/nbots/nb/gateway/config"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

// TestLiveOutputInProgressEdits: while exec runs a command, the turn's
// progress message on Telegram (a channel that edits) is edited to show
// the command's last lines; the answer then replaces it.
func TestLiveOutputInProgressEdits(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("SKIPPING: no /bin/sh to run the command")
	}
	tg, err := telegramtest.New("123456:live")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tg.Close)
	brain := func(turn providertest.Turn) providertest.Reply {
		for _, m := range turn.Messages {
			if m.Role == "tool" {
				return providertest.Reply{Chunks: []string{"the command finished"}}
			}
		}
		args, _ := json.Marshal(map[string]any{"command": "printf 'line one\\nline two\\n'; while [ ! -e go ]; do sleep 0.05; done; echo finished"})
		return providertest.Reply{Calls: []providertest.Call{{Name: "exec", Arguments: string(args)}}}
	}
	model := httptest.NewServer(openaitest.New(brain))
	t.Cleanup(model.Close)
	dir := t.TempDir()
	ws := filepath.Join(dir, "workspace")
	cfg := map[string]any{
		"agents":    map[string]any{"defaults": map[string]any{"workspace": ws, "model": "gpt-4o-mini", "provider": "custom"}},
		"providers": map[string]any{"custom": map[string]any{"apiBase": model.URL, "apiKey": "test-key"}},
		"channels": map[string]any{"sendProgress": true, "sendToolHints": false, "telegram": map[string]any{
			"enabled": true, "token": tg.Token, "apiBase": tg.URL, "allowFrom": []string{"111"}, "pollTimeout": 1,
		}},
		"tools":   map[string]any{"exec": map[string]any{"sandbox": "off", "timeout": 60}},
		"gateway": map[string]any{"heartbeat": map[string]any{"enabled": false}},
	}
	data, _ := json.Marshal(cfg)
	path := filepath.Join(dir, "gateway.json")
	os.WriteFile(path, data, 0o600)
	c, err := config.Load(path, "", config.Env(nil))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := testOptions(t)
	o.Listeners = []net.Listener{ln}
	o.Host.Environ = append(o.Host.Environ, "PATH=/usr/bin:/bin")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	gw, err := Open(ctx, c, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Close)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- gw.Run(runCtx) }()
	defer func() {
		stop()
		<-done
	}()

	owner := botapi.User{ID: 111, FirstName: "owner"}
	tg.Say(owner, "run it")
	var live string
	for live == "" {
		for _, m := range tg.Sent(owner.ID) {
			if strings.Contains(m.Text, "line two") {
				live = m.Text
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("no message showed the running command's output; sent: %+v", tg.Sent(owner.ID))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The command still runs: it waits for the file.
	if !strings.Contains(live, "line one") || strings.Contains(live, "finished") || !strings.Contains(live, "exec") {
		t.Errorf("the live progress message is %q", live)
	}
	if err := os.WriteFile(filepath.Join(ws, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for {
		sent := tg.Sent(owner.ID)
		if len(sent) > 0 && sent[len(sent)-1].Text == "the command finished" {
			for _, m := range sent {
				if strings.Contains(m.Text, "line two") {
					t.Errorf("the live output stayed in the chat: %+v", sent)
				}
			}
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no answer after the command; sent: %+v", sent)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
