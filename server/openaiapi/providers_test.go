package openaiapi

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/nbots/nb/provider/providertest"
)

// Every provider behind the API: a plain answer and a round that mixes a
// cartridge tool and a client tool, streamed and whole, on both
// endpoints.
func TestEveryProvider(t *testing.T) {
	sources := map[string]string{}
	for _, p := range providerIDs() {
		sources[p] = cartridgeOn(p, weatherTool)
	}
	s := newTestServer(t, providertest.Echo, sources, Options{})
	tools := `"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}]`
	ask := `{"role":"user","content":"call get-weather {\"city\":\"Paris\"}; lookup {\"q\":\"x\"}"}`
	for _, p := range providerIDs() {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", p, stream), func(t *testing.T) {
				resp, body := s.post(t, "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"stream":%v,"messages":[{"role":"user","content":"hi"}]}`, p, stream))
				if a := assembled(t, body, stream); resp.StatusCode != 200 || a.text != "echo: hi" || a.finish != "stop" {
					t.Fatalf("status %d, answer %+v: %s", resp.StatusCode, a, body)
				}
				resp, body = s.post(t, "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"stream":%v,%s,"messages":[%s]}`, p, stream, tools, ask))
				a := assembled(t, body, stream)
				if resp.StatusCode != 200 || a.finish != "tool_calls" || len(a.calls) != 1 || a.calls[0].Name != "lookup" {
					t.Fatalf("status %d, answer %+v: %s", resp.StatusCode, a, body)
				}
				id := a.calls[0].ID
				resp, body = s.post(t, "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"stream":%v,%s,"messages":[%s,{"role":"assistant","tool_calls":[{"id":%q,"type":"function","function":{"name":"lookup","arguments":%q}}]},{"role":"tool","tool_call_id":%q,"content":"found"}]}`,
					p, stream, tools, ask, id, a.calls[0].Arguments, id))
				if a := assembled(t, body, stream); resp.StatusCode != 200 || a.text != "tool get-weather said: sunny in Paris; tool lookup said: found" {
					t.Fatalf("status %d, answer %+v: %s", resp.StatusCode, a, body)
				}
				resp, body = s.post(t, "/v1/responses", fmt.Sprintf(`{"model":%q,"stream":%v,"input":"hi"}`, p, stream))
				if resp.StatusCode != 200 || !strings.Contains(body, `"text":"echo: hi"`) {
					t.Fatalf("responses: status %d: %s", resp.StatusCode, body)
				}
			})
		}
	}
}

// 200 streamed requests at once, to different cartridges on every
// provider, each getting its own answer whole.
func TestConcurrentStreams(t *testing.T) {
	sources := map[string]string{}
	ids := providerIDs()
	const cartridges = 21
	for i := range cartridges {
		sources[fmt.Sprintf("c%02d", i)] = cartridgeOn(ids[i%len(ids)], weatherTool)
	}
	s := newTestServer(t, providertest.Echo, sources, Options{})
	tools := `"tools":[{"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}}]`
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			model := fmt.Sprintf("c%02d", i%cartridges)
			var body string
			want := ""
			if i%2 == 0 {
				_, body = s.post(t, "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"request %d"}]}`, model, i))
				want = fmt.Sprintf("echo: request %d", i)
				if a := assembled(t, body, true); a.text != want || a.finish != "stop" || a.usage == nil {
					errs <- fmt.Sprintf("%s request %d: %+v", model, i, a)
				}
				return
			}
			_, body = s.post(t, "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"stream":true,%s,"messages":[{"role":"user","content":"call get-weather {\"city\":\"C%d\"}; lookup {\"q\":\"%d\"}"}]}`, model, tools, i, i))
			a := assembled(t, body, true)
			if len(a.calls) != 1 || a.calls[0].Arguments != fmt.Sprintf(`{"q":"%d"}`, i) {
				errs <- fmt.Sprintf("%s request %d: %+v", model, i, a)
				return
			}
			_, body = s.post(t, "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"stream":true,%s,"messages":[{"role":"user","content":"call get-weather {\"city\":\"C%d\"}; lookup {\"q\":\"%d\"}"},{"role":"assistant","tool_calls":[{"id":%q,"type":"function","function":{"name":"lookup","arguments":%q}}]},{"role":"tool","tool_call_id":%q,"content":"r%d"}]}`,
				model, tools, i, i, a.calls[0].ID, a.calls[0].Arguments, a.calls[0].ID, i))
			want = fmt.Sprintf("tool get-weather said: sunny in C%d; tool lookup said: r%d", i, i)
			if got := assembled(t, body, true).text; got != want {
				errs <- fmt.Sprintf("%s request %d: %q, want %q", model, i, got, want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
