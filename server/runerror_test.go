package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/internal/metric"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/server"
)

// runErrors are the control page's last errors about runs of cartridge.
func runErrors(cartridge string) []metric.Error {
	var out []metric.Error
	for _, e := range metric.LastErrors() {
		if e.Where == "run "+cartridge {
			out = append(out, e)
		}
	}
	return out
}

// A run that fails reaches the control page's last errors under its
// cartridge's name (not "none": the OpenAI routes name it after the
// admission), saying what failed in a few words of its kind: the
// provider's status and code, the run's deadline; never the provider's
// message, which quotes the user's words. A run that succeeds does not.
func TestRunErrorsReachControlPage(t *testing.T) {
	_, url, _ := fakeServer(t, func(turn providertest.Turn) providertest.Reply {
		switch turn.LastUser() {
		case "fail":
			return providertest.Reply{Status: 400, ErrorBody: `{"error":{"message":"your words 'fail' are secret-user-words","type":"invalid_request_error","code":"bad_words"}}`}
		case "slow":
			return providertest.Reply{Chunks: []string{"a", "b", "c"}, Delay: time.Second}
		}
		return providertest.Echo(turn)
	}, []string{"failing", "slowpoke"}, func(o *server.Options) { o.Limits.RunTimeout = 500 * time.Millisecond })

	if code, body := post(t, url+"/v1/chat/completions", `{"model":"failing","messages":[{"role":"user","content":"hi"}]}`); code != 200 {
		t.Fatalf("a run that succeeds: %d %s", code, body)
	}
	if got := runErrors("failing"); len(got) != 0 {
		t.Fatalf("a run that succeeded is an error: %+v", got)
	}
	if code, body := post(t, url+"/v1/chat/completions", `{"model":"failing","messages":[{"role":"user","content":"fail"}]}`); code != 502 {
		t.Fatalf("a run that fails: %d %s", code, body)
	}
	if code, body := post(t, url+"/cartridges", `{"cartridge":"failing","input":"fail"}`); code != 502 {
		t.Fatalf("a Nano Bots run that fails: %d %s", code, body)
	}
	got := runErrors("failing")
	if len(got) != 2 {
		t.Fatalf("no run error among %+v", metric.LastErrors())
	}
	for _, e := range got {
		if e.Message != "HTTP 502: provider openai: HTTP 400 bad_words" {
			t.Errorf("run error %q", e.Message)
		}
		if strings.Contains(e.Message, "secret-user-words") {
			t.Errorf("the run error quotes the provider's message: %q", e.Message)
		}
	}

	if code, body := post(t, url+"/v1/chat/completions", `{"model":"slowpoke","stream":true,"messages":[{"role":"user","content":"slow"}]}`); code != 504 {
		t.Fatalf("a run past its deadline: %d %s", code, body)
	}
	if got := runErrors("slowpoke"); len(got) != 1 || !strings.HasPrefix(got[0].Message, "HTTP 504: the run took longer than the server's limit per run") {
		t.Errorf("the timed out run: %+v", got)
	}
}
