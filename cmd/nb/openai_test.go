package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbots/nb/internal/npmtest"
	"github.com/nbots/nb/provider/providertest"
)

// openaiBrain echoes, and fails when asked to: the whole request, or a
// stream once it began.
func openaiBrain(turn providertest.Turn) providertest.Reply {
	switch turn.LastUser() {
	case "fail please":
		return providertest.Reply{Status: 500}
	case "break midway":
		return providertest.Reply{Chunks: []string{"Hel", "lo"}, StreamError: "The model crashed."}
	}
	return providertest.Echo(turn)
}

// token is the server's token in these tests.
const token = "0123456789abcdef0123456789abcdef"

// providerSection is the provider section of a cartridge on each of the
// seven providers' fakes.
var providerSection = map[string]string{
	"openai":    "{id: openai, credentials: {address: ENV/OPENAI_API_ADDRESS, access-token: ENV/OPENAI_API_KEY}, settings: {model: gpt-4o-mini}}",
	"ollama":    "{id: ollama, credentials: {address: ENV/OLLAMA_API_ADDRESS}, settings: {model: llama3.2}}",
	"anthropic": "{id: anthropic, credentials: {address: ENV/ANTHROPIC_API_ADDRESS, api-key: ENV/ANTHROPIC_API_KEY}, settings: {model: claude-sonnet-4-5, max_tokens: 1024}}",
	"cohere":    "{id: cohere, credentials: {address: ENV/COHERE_API_ADDRESS, api-key: ENV/COHERE_API_KEY}, settings: {model: command-a-03-2025}}",
	"google":    "{id: google, credentials: {service: generative-language-api, address: ENV/GOOGLE_API_ADDRESS, api-key: ENV/GOOGLE_API_KEY}, options: {model: gemini-2.5-flash}}",
	"maritaca":  "{id: maritaca, credentials: {address: ENV/MARITACA_API_ADDRESS, api-key: ENV/MARITACA_API_KEY}, settings: {model: sabia-3}}",
	"mistral":   "{id: mistral, credentials: {address: ENV/MISTRAL_API_ADDRESS, api-key: ENV/MISTRAL_API_KEY}, settings: {model: mistral-small-latest}}",
}

// openaiServe starts the seven fakes and nb serve over a folder of
// cartridges: echo (OpenAI), and weather-<provider> with a server-side
// tool on each provider. The server's token is token.
func openaiServe(t *testing.T, args ...string) (url string, env []string, dir string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts nb serve")
	}
	for variable, mk := range fakes {
		h, _ := mk(openaiBrain)
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		env = append(env, variable+"="+srv.URL)
	}
	for _, key := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "COHERE_API_KEY", "GOOGLE_API_KEY", "MARITACA_API_KEY", "MISTRAL_API_KEY"} {
		env = append(env, key+"=test-key")
	}
	env = append(env, "NB_SERVE_TOKEN="+token)
	dir = t.TempDir()
	write := func(name, src string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("echo.yml", "meta: {name: Echo, author: tests, version: 1.0.0}\nprovider: "+providerSection["openai"]+"\n")
	for p, section := range providerSection {
		write("weather-"+p+".yml", `meta: {name: Weather, author: tests, version: 1.0.0}
behaviors: {interaction: {directive: You know the weather.}}
safety: {tools: {confirmable: false}}
tools:
  - name: get-weather
    description: Gets the weather of a city.
    parameters: {type: object, properties: {city: {type: string}}, required: [city]}
    lua: 'return "sunny in " .. parameters.city'
provider: `+section+"\n")
	}
	_, url, _ = nbServe(t, dir, env, append([]string{"--watch", "0"}, args...)...)
	return url, env, dir
}

// call sends body to nb serve with the token and returns the answer.
func call(t *testing.T, url, token, body string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// Real clients, installed from npm by scripts/fetch-npm, against nb
// serve: the openai SDK (with the server's token), the ai SDK, and
// @openai/agents on the Responses endpoint.
func TestServeOpenAIClients(t *testing.T) {
	npmtest.Dir(t, "openai")
	url, _, _ := openaiServe(t)
	for _, script := range []string{"openai-sdk.mjs", "ai-sdk.mjs", "agents.mjs"} {
		t.Run(script, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			out, err := npmtest.Node(ctx, t, "openai", script, "NB_BASE_URL="+url+"/v1", "NB_TOKEN="+token, "NB_MODEL=echo", "NB_CHECK_AUTH=1").CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			t.Logf("%s", out)
		})
	}
}

// The routes under nb serve's token, a round that mixes a cartridge tool
// and a client tool on every provider, and a server restart in the
// middle of one: the client is told its server part is gone, and goes on.
func TestServeOpenAIToolRounds(t *testing.T) {
	url, env, dir := openaiServe(t)
	if resp, body := call(t, url, "wrong", `{"model":"echo","messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != 401 || !strings.HasPrefix(body, `{"error":{"message":`) || !strings.Contains(body, `"type":"authentication_error"`) {
		t.Errorf("a wrong token: %d %s", resp.StatusCode, body)
	}
	tools := `"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}]`
	ask := `{"role":"user","content":"call get-weather {\"city\":\"Paris\"}; lookup {\"q\":\"x\"}"}`
	continueWith := func(url, model, id string) (*http.Response, string) {
		return call(t, url, token, fmt.Sprintf(`{"model":%q,%s,"messages":[%s,{"role":"assistant","tool_calls":[{"id":%q,"type":"function","function":{"name":"lookup","arguments":"{\"q\":\"x\"}"}}]},{"role":"tool","tool_call_id":%q,"content":"found"}]}`, model, tools, ask, id, id))
	}
	var lastID string
	for p := range providerSection {
		model := "weather-" + p
		resp, body := call(t, url, token, fmt.Sprintf(`{"model":%q,%s,"messages":[%s]}`, model, tools, ask))
		if resp.StatusCode != 200 || !strings.Contains(body, `"finish_reason":"tool_calls"`) {
			t.Fatalf("%s: %d %s", p, resp.StatusCode, body)
		}
		id := between(body, `"tool_calls":[{"id":"`, `"`)
		resp, body = continueWith(url, model, id)
		if want := `"content":"tool get-weather said: sunny in Paris; tool lookup said: found"`; resp.StatusCode != 200 || !strings.Contains(body, want) {
			t.Errorf("%s: %d %s", p, resp.StatusCode, body)
		}
		lastID = id
	}
	// A new server process has not kept the round.
	_, url2, _ := nbServe(t, dir, env, "--watch", "0")
	resp, body := continueWith(url2, "weather-openai", lastID)
	if resp.StatusCode != 200 || resp.Header.Get("X-Nb-Tool-Rounds-Lost") != "1" || !strings.Contains(body, `"content":"tool lookup said: found"`) {
		t.Errorf("after a restart: %d %q %s", resp.StatusCode, resp.Header.Get("X-Nb-Tool-Rounds-Lost"), body)
	}
}

func between(s, start, end string) string {
	_, rest, _ := strings.Cut(s, start)
	out, _, _ := strings.Cut(rest, end)
	return out
}

// 200 streamed answers at once through nb serve, to cartridges on every
// provider, each whole and its own (the server's default of 64 runs at
// once, and of 64 connections per client address, are raised).
func TestServeOpenAIConcurrentStreams(t *testing.T) {
	url, _, _ := openaiServe(t, "--max-runs", "256", "--max-client-conns", "256")
	var models []string
	for p := range providerSection {
		models = append(models, "weather-"+p)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			model := models[i%len(models)]
			req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(fmt.Sprintf(
				`{"model":%q,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"request %d"}]}`, model, i)))
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs <- err.Error()
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var text strings.Builder
			for _, line := range strings.Split(string(b), "\n") {
				if c := between(line, `"delta":{"content":"`, `"`); c != "" {
					text.WriteString(c)
				}
			}
			if want := fmt.Sprintf("echo: request %d", i); resp.StatusCode != 200 || text.String() != want || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
				errs <- fmt.Sprintf("%s #%d: status %d, %q, want %q", model, i, resp.StatusCode, text.String(), want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
