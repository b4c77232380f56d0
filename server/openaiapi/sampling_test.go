package openaiapi

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/nbots/nb/provider/providertest"
)

// The client's sampling settings reach the provider under its own names,
// over the cartridge's; one the provider has not is a 400 naming the
// model and the provider; values out of range are refused.
func TestSamplingReachesTheProvider(t *testing.T) {
	s := newTestServer(t, providertest.Echo, map[string]string{"claude": cartridgeOn("anthropic", ""), "gpt": cartridgeOn("openai", "")}, Options{})
	resp, body := s.post(t, "/v1/chat/completions", `{"model":"claude","temperature":0.25,"top_p":0.5,"max_completion_tokens":42,"stop":"END","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	sent := s.fakes.recorder.Last()
	if got := fmt.Sprint(sent["temperature"], sent["top_p"], sent["max_tokens"], sent["stop_sequences"]); got != "0.25 0.5 42 [END]" {
		t.Errorf("sent %s", got)
	}
	resp, body = s.post(t, "/v1/responses", `{"model":"gpt","temperature":0,"max_output_tokens":7,"input":"hi"}`)
	sent = s.fakes.recorder.Last()
	if resp.StatusCode != 200 || fmt.Sprint(sent["temperature"], sent["max_tokens"]) != "0 7" || !strings.Contains(body, `"max_output_tokens":7`) || !strings.Contains(body, `"temperature":0,`) {
		t.Errorf("status %d, sent %v: %s", resp.StatusCode, sent, body)
	}
	resp, body = s.post(t, "/v1/chat/completions", `{"model":"claude","seed":1,"frequency_penalty":0.5,"messages":[{"role":"user","content":"hi"}]}`)
	want := `{"error":{"message":"model claude (provider anthropic) cannot take this request: anthropic: the sampling settings seed, frequency_penalty are not supported (this API has no such setting: leave it out of the request)","type":"invalid_request_error","param":null,"code":"unsupported_by_provider"}}` + "\n"
	if resp.StatusCode != 400 || body != want {
		t.Errorf("status %d: %s", resp.StatusCode, body)
	}
	for _, bad := range []string{`"temperature":3`, `"top_p":-1`, `"max_tokens":0`, `"stop":["a","b","c","d","e"]`, `"stop":7`, `"presence_penalty":2.5`} {
		resp, body = s.post(t, "/v1/chat/completions", `{"model":"gpt",`+bad+`,"messages":[{"role":"user","content":"hi"}]}`)
		if resp.StatusCode != 400 || !strings.Contains(body, `"param":"`+strings.Split(strings.Trim(bad, `"`), `"`)[0]+`"`) {
			t.Errorf("%s: status %d: %s", bad, resp.StatusCode, body)
		}
	}
}

// Images in the client's messages reach providers that take them; one
// that cannot take them is a 400 naming the model and the provider,
// never a silent drop.
func TestImages(t *testing.T) {
	sources := map[string]string{}
	for _, p := range providerIDs() {
		sources[p] = cartridgeOn(p, "")
	}
	s := newTestServer(t, providertest.Echo, sources, Options{})
	png := "data:image/png;base64," + base64.StdEncoding.EncodeToString(providertest.PNG.Data)
	accepted := 0
	for _, p := range providerIDs() {
		chat := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":%q}}]}]}`, p, png)
		responses := fmt.Sprintf(`{"model":%q,"input":[{"role":"user","content":[{"type":"input_text","text":"what is this?"},{"type":"input_image","image_url":%q,"detail":"auto"}]}]}`, p, png)
		for _, req := range []struct{ path, body string }{{"/v1/chat/completions", chat}, {"/v1/responses", responses}} {
			resp, body := s.post(t, req.path, req.body)
			switch resp.StatusCode {
			case 200:
				if !strings.Contains(body, fmt.Sprintf("echo: what is this? [image image/png %d bytes]", len(providertest.PNG.Data))) {
					t.Errorf("%s %s: the image did not reach the model: %s", p, req.path, body)
				}
				accepted++
			case 400:
				if !strings.Contains(body, fmt.Sprintf(`"message":"model %s (provider %s) cannot take this request: %s: images are not supported`, p, p, p)) {
					t.Errorf("%s %s: %s", p, req.path, body)
				}
			default:
				t.Errorf("%s %s: status %d: %s", p, req.path, resp.StatusCode, body)
			}
		}
	}
	if accepted < 8 {
		t.Errorf("only %d requests with images were accepted", accepted)
	}
	// Maritaca takes text only.
	resp, _ := s.post(t, "/v1/chat/completions", fmt.Sprintf(`{"model":"maritaca","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":%q}}]}]}`, png))
	if resp.StatusCode != 400 {
		t.Errorf("maritaca: status %d", resp.StatusCode)
	}
}
