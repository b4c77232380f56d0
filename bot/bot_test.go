package bot

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/tool"

	_ "github.com/nbots/nb/provider/google"
	_ "github.com/nbots/nb/provider/openai"
)

// fakeOpenAI serves the in-process OpenAI fake, which refuses (as the
// API does) a conversation whose tool messages break the rules.
func fakeOpenAI(t *testing.T, brain providertest.Brain) string {
	t.Helper()
	srv := httptest.NewServer(openaitest.New(brain))
	t.Cleanup(srv.Close)
	return srv.URL
}

func cartridgeFor(t *testing.T, url string, extra string) *cartridge.Cartridge {
	t.Helper()
	if !strings.Contains(extra, "safety:") {
		extra += "safety: {tools: {confirmable: false}}\n"
	}
	src := fmt.Sprintf(`meta: {author: test, name: bot, version: 1.0.0}
provider:
  id: openai
  credentials: {address: %s, access-token: ENV/TEST_KEY}
  settings: {model: gpt-4o}
%s`, url, extra)
	c, err := cartridge.Parse([]byte(src), "bot.yml", cartridge.FormatYAML, Host{Environ: []string{"TEST_KEY=k"}}.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// slowTool sleeps, then answers.
type slowTool struct{ d time.Duration }

func (s slowTool) Spec() tool.Spec {
	return tool.Spec{Name: "slow", Parameters: tool.DefaultParameters()}
}

func (s slowTool) Run(ctx context.Context, _ tool.Call) (any, error) {
	select {
	case <-time.After(s.d):
		return "slept", nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Two exchanges with tool calls on one key at once: the second waits for
// the first (saying so), their events never interleave, and the key
// stays usable. Before exchanges held their key, the events interleaved
// (user, user, call A, result B, ...) and every later exchange on the key
// failed with the provider's 400 about a tool message without its call.
func TestOneExchangePerKey(t *testing.T) {
	url := fakeOpenAI(t, providertest.Echo)
	c := cartridgeFor(t, url, "")
	b, err := New(context.Background(), c, Host{Environ: []string{"NANO_BOTS_STATE_PATH=" + t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	waited := 0
	x := Exchange{Mode: cartridge.Eval, Key: "K", Wait: true, Tools: []tool.Tool{slowTool{200 * time.Millisecond}},
		OnEvent: func(ev agent.Event) {
			if ev.Kind == agent.Waiting {
				mu.Lock()
				waited++
				mu.Unlock()
			}
		}}
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := b.Ask(context.Background(), x, "call slow {}"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if waited != 1 {
		t.Errorf("%d exchanges said they waited, want 1", waited)
	}
	res, err := b.Ask(context.Background(), x, "hello again")
	if err != nil {
		t.Fatalf("the key is unusable: %v", err)
	}
	if res.Text != "echo: hello again" {
		t.Errorf("answer %q", res.Text)
	}
	store, _ := b.Conversation("", "K")
	history, _ := store.History(context.Background())
	var who []string
	for _, ev := range history {
		who = append(who, string(ev.Who))
	}
	if got := strings.Join(who, " "); got != "user AI tool AI user AI tool AI user AI" {
		t.Errorf("history = %s", got)
	}

	// Without waiting, a busy key is an error that says so.
	turn, _ := store.Begin(context.Background(), nil)
	defer turn.End()
	x.Wait = false
	_, err = b.Ask(context.Background(), x, "hi")
	var busy *BusyError
	if !errors.As(err, &busy) || !strings.Contains(err.Error(), `state key "K" is busy`) {
		t.Errorf("err = %v, want a BusyError", err)
	}
}

// A panic inside one exchange is that exchange's error; the bot goes on.
func TestPanicIsContained(t *testing.T) {
	url := fakeOpenAI(t, providertest.Echo)
	b, err := New(context.Background(), cartridgeFor(t, url, "safety: {tools: {confirmable: true}}\n"), Host{})
	if err != nil {
		t.Fatal(err)
	}
	x := Exchange{Mode: cartridge.Eval, Tools: []tool.Tool{slowTool{}}, Confirmer: panicky{}}
	_, err = b.Ask(context.Background(), x, "call slow {}")
	var pe *PanicError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "internal error in nb") {
		t.Fatalf("err = %v, want a PanicError", err)
	}
	if res, err := b.Ask(context.Background(), Exchange{Mode: cartridge.Eval}, "still there?"); err != nil || res.Text != "echo: still there?" {
		t.Errorf("after the panic: %v, %v", res, err)
	}
}

type panicky struct{}

func (panicky) Confirm(context.Context, tool.Call, string) (bool, error) { panic("boom") }

// The bot reads nothing from the process environment: ENV references and
// settings come from the Host.
func TestNoProcessEnvironment(t *testing.T) {
	t.Setenv("TEST_KEY", "from-the-process")
	c, err := cartridge.Parse([]byte("provider:\n  id: openai\n  credentials: {access-token: ENV/TEST_KEY}\n"), "bot.yml", cartridge.FormatYAML, Host{}.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(context.Background(), c, Host{})
	if err == nil || !strings.Contains(err.Error(), "TEST_KEY is not set") {
		t.Errorf("err = %v, want the variable named as not set", err)
	}
}

// Many exchanges of one bot at once, stateless and on their own keys,
// with tools: each gets its own answer (run with -race).
func TestConcurrentExchanges(t *testing.T) {
	url := fakeOpenAI(t, providertest.Echo)
	b, err := New(context.Background(), cartridgeFor(t, url, ""), Host{Environ: []string{"NANO_BOTS_STATE_PATH=" + t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			x := Exchange{Mode: cartridge.REPL, Tools: []tool.Tool{slowTool{time.Millisecond}}}
			if i%2 == 0 {
				x.Key = fmt.Sprint("k", i)
			}
			res, err := b.Ask(context.Background(), x, "call slow {}")
			if err != nil || res.Text != "tool slow said: slept" {
				t.Errorf("%d: %+v, %v", i, res, err)
			}
		}()
	}
	wg.Wait()
}

// Retries reach the exchange's events.
func TestRetryEvents(t *testing.T) {
	url := fakeOpenAI(t, providertest.Scripted(providertest.Reply{Status: 500}))
	policy := provider.RetryPolicy{MaxRetries: 1, Sleep: func(context.Context, time.Duration) error { return nil }}
	b, err := New(context.Background(), cartridgeFor(t, url, ""), Host{Retry: &policy})
	if err != nil {
		t.Fatal(err)
	}
	var retries []string
	x := Exchange{Mode: cartridge.Eval, OnEvent: func(ev agent.Event) {
		if ev.Kind == agent.Retry {
			retries = append(retries, fmt.Sprint(ev.Attempt, " ", ev.Err))
		}
	}}
	if _, err := b.Ask(context.Background(), x, "hi"); err != nil {
		t.Fatal(err)
	}
	if len(retries) != 1 || !strings.HasPrefix(retries[0], "1 openai: HTTP 500") {
		t.Errorf("retries = %q", retries)
	}
}

// A bot built for a host that does not lend its credentials (a server
// running a client's cartridge) cannot use the host's key files or
// application-default credentials.
func TestHostCredentialsFollowTheHost(t *testing.T) {
	src := "provider:\n  id: google\n  credentials: {service: vertex-ai-api, region: us-central1, file-path: /etc/hostname}\n  options: {model: gemini-pro}\n"
	c, err := cartridge.Parse([]byte(src), "bot.yml", cartridge.FormatYAML, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(context.Background(), c, Host{AllowHostCredentials: false})
	var he *provider.HostCredentialsError
	if !errors.As(err, &he) {
		t.Errorf("err = %v, want a HostCredentialsError", err)
	}
}

// A host's Store keeps the conversations of its bots instead of the
// files of the state path.
func TestHostStore(t *testing.T) {
	url := fakeOpenAI(t, providertest.Echo)
	c := cartridgeFor(t, url, "")
	files, shared := t.TempDir(), state.Files{Root: t.TempDir()}
	b, err := New(context.Background(), c, Host{Environ: []string{"NANO_BOTS_STATE_PATH=" + files}, Store: shared})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Ask(context.Background(), Exchange{Mode: cartridge.Eval, Key: "K"}, "hello"); err != nil {
		t.Fatal(err)
	}
	conv, _ := shared.Open(StateBot(c), "unknown", "K")
	if history, err := conv.History(context.Background()); err != nil || len(history) != 2 {
		t.Errorf("the host's store holds %d events, %v; want 2", len(history), err)
	}
	if entries, _ := os.ReadDir(files); len(entries) != 0 {
		t.Errorf("the state path was written: %v", entries)
	}
}
