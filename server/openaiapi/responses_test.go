package openaiapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/provider/providertest"
)

// A whole response has OpenAI's fields; it is kept for GET and
// previous_response_id, and can be deleted.
func TestResponseWhole(t *testing.T) {
	s := newTestServer(t, providertest.Echo, map[string]string{"echo": cartridgeOn("openai", "")}, Options{})
	resp, body := s.post(t, "/v1/responses", `{"model":"echo","instructions":"Be brief.","input":"hi","metadata":{"k":"v"}}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	r := decodeJSON(t, body)
	var keys []string
	for k := range r {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if got := strings.Join(keys, " "); got != "background completed_at created_at error id incomplete_details instructions max_output_tokens metadata model object output parallel_tool_calls previous_response_id reasoning status store temperature text tool_choice tools top_p truncation usage user" {
		t.Errorf("keys %s", got)
	}
	id, _ := r["id"].(string)
	if !regexp.MustCompile(`^resp_[a-z2-7]{24}$`).MatchString(id) || r["object"] != "response" || r["status"] != "completed" || r["model"] != "echo" || r["instructions"] != "Be brief." || r["tool_choice"] != "auto" || path(r, "metadata", "k") != "v" {
		t.Errorf("response %s", body)
	}
	out := mustJSON(t, r["output"])
	if !regexp.MustCompile(`^\[\{"content":\[\{"annotations":\[\],"logprobs":\[\],"text":"echo: hi","type":"output_text"\}\],"id":"msg_[a-z2-7]{24}","role":"assistant","status":"completed","type":"message"\}\]$`).MatchString(out) {
		t.Errorf("output %s", out)
	}
	if u := mustJSON(t, r["usage"]); !regexp.MustCompile(`^\{"input_tokens":\d+,"input_tokens_details":\{"cached_tokens":0\},"output_tokens":\d+,"output_tokens_details":\{"reasoning_tokens":0\},"total_tokens":\d+\}$`).MatchString(u) {
		t.Errorf("usage %s", u)
	}
	if got := path(s.fakes.recorder.Last(), "messages", 0, "content"); got != "You are a test.\n\nBe brief." {
		t.Errorf("system sent %#v", got)
	}

	get, err := http.Get(s.URL + "/v1/responses/" + id)
	if err != nil {
		t.Fatal(err)
	}
	get.Body.Close()
	if get.StatusCode != 200 {
		t.Errorf("GET: status %d", get.StatusCode)
	}

	// The next turn continues from the stored conversation; the previous
	// instructions are not carried over.
	resp, body = s.post(t, "/v1/responses", fmt.Sprintf(`{"model":"echo","previous_response_id":%q,"input":[{"role":"user","content":[{"type":"input_text","text":"again"}]}]}`, id))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if got := path(decodeJSON(t, body), "output", 0, "content", 0, "text"); got != "echo: again" {
		t.Errorf("answer %v", got)
	}
	sent := s.fakes.recorder.Last()
	if got := mustJSON(t, sent["messages"]); got != normJSON(t, `[{"role":"system","content":"You are a test."},{"role":"user","content":"hi"},{"role":"assistant","content":"echo: hi"},{"role":"user","content":"again"}]`) {
		t.Errorf("sent %s", got)
	}
	if got := path(decodeJSON(t, body), "previous_response_id"); got != id {
		t.Errorf("previous_response_id %v", got)
	}

	req, _ := http.NewRequest(http.MethodDelete, s.URL+"/v1/responses/"+id, nil)
	del, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	del.Body.Close()
	resp, body = s.post(t, "/v1/responses", fmt.Sprintf(`{"model":"echo","previous_response_id":%q,"input":"x"}`, id))
	if resp.StatusCode != 400 || !strings.Contains(body, `"param":"previous_response_id","code":"previous_response_not_found"`) {
		t.Errorf("after delete: status %d: %s", resp.StatusCode, body)
	}
}

// A streamed response sends OpenAI's events in order, numbered from 0,
// each named in its event: line.
func TestResponseStream(t *testing.T) {
	s := newTestServer(t, providertest.Echo, map[string]string{"echo": cartridgeOn("openai", "")}, Options{})
	tools := `"tools":[{"type":"function","name":"lookup","description":"Looks up.","parameters":{"type":"object","properties":{"q":{"type":"string"}}},"strict":false}]`
	resp, body := s.post(t, "/v1/responses", `{"model":"echo","stream":true,`+tools+`,"input":"hello"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	names, text, final := responseEvents(t, body)
	want := "response.created response.in_progress response.output_item.added response.content_part.added " +
		strings.Repeat("response.output_text.delta ", 4) + "response.output_text.done response.content_part.done response.output_item.done response.completed"
	if strings.Join(names, " ") != want {
		t.Errorf("events\n%s\nwant\n%s", strings.Join(names, " "), want)
	}
	if text != "echo: hello" {
		t.Errorf("text %q", text)
	}
	if path(final, "status") != "completed" || path(final, "output", 0, "content", 0, "text") != "echo: hello" || path(final, "tools", 0, "name") != "lookup" {
		t.Errorf("final %s", mustJSON(t, final))
	}

	// A call to the client's function: its item, argument deltas, done.
	resp, body = s.post(t, "/v1/responses", `{"model":"echo","stream":true,`+tools+`,"input":"call lookup {\"q\":\"x\"}"}`)
	names, _, final = responseEvents(t, body)
	want = "response.created response.in_progress response.output_item.added response.function_call_arguments.delta response.function_call_arguments.done response.output_item.done response.completed"
	if strings.Join(names, " ") != want {
		t.Errorf("events\n%s\nwant\n%s", strings.Join(names, " "), want)
	}
	item := path(final, "output", 0)
	if path(item, "type") != "function_call" || path(item, "name") != "lookup" || path(item, "arguments") != `{"q":"x"}` || path(item, "call_id") != "call_1" || path(item, "status") != "completed" {
		t.Errorf("item %s", mustJSON(t, item))
	}
}

// responseEvents checks a streamed response's framing and numbering and
// returns the event types, the streamed text and the final response.
func responseEvents(t *testing.T, body string) ([]string, string, map[string]any) {
	t.Helper()
	var names []string
	var text strings.Builder
	var final map[string]any
	items := map[string]bool{}
	for i, ev := range readSSE(t, body) {
		d := decodeJSON(t, ev.Data)
		if d["type"] != ev.Event {
			t.Errorf("event %q holds type %v", ev.Event, d["type"])
		}
		if n := mustInt(t, d["sequence_number"]); n != int64(i) {
			t.Errorf("event %d has sequence_number %d", i, n)
		}
		names = append(names, ev.Event)
		switch ev.Event {
		case "response.output_item.added":
			items[path(d, "item", "id").(string)] = true
			if path(d, "item", "status") != "in_progress" {
				t.Errorf("added %s", ev.Data)
			}
		case "response.output_text.delta":
			text.WriteString(d["delta"].(string))
			if !items[d["item_id"].(string)] {
				t.Errorf("delta of an item never added: %s", ev.Data)
			}
		case "response.completed", "response.incomplete", "response.failed":
			final = d["response"].(map[string]any)
		case "response.created", "response.in_progress":
			if path(d, "response", "status") != "in_progress" || mustJSON(t, path(d, "response", "output")) != "[]" || path(d, "response", "usage") != nil {
				t.Errorf("%s", ev.Data)
			}
		}
	}
	if strings.Contains(body, "[DONE]") {
		t.Error("a Responses stream ends with [DONE]")
	}
	return names, text.String(), final
}

// A round that calls a cartridge tool and a client function, continued
// both ways: with previous_response_id, and with the whole conversation
// as items.
func TestResponseMixedRound(t *testing.T) {
	s := newTestServer(t, providertest.Echo, map[string]string{"weather": cartridgeOn("openai", weatherTool)}, Options{})
	tools := `"tools":[{"type":"function","name":"lookup","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}]`
	ask := `call get-weather {\"city\":\"Paris\"}; lookup {\"q\":\"x\"}`
	resp, body := s.post(t, "/v1/responses", `{"model":"weather",`+tools+`,"input":"`+ask+`"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	r := decodeJSON(t, body)
	if len(r["output"].([]any)) != 1 || path(r, "output", 0, "type") != "function_call" {
		t.Fatalf("output %s", mustJSON(t, r["output"]))
	}
	callID := path(r, "output", 0, "call_id").(string)
	if !strings.HasPrefix(callID, "call_2"+roundMark) {
		t.Fatalf("call_id %s", callID)
	}
	want := "tool get-weather said: sunny in Paris; tool lookup said: found"
	// With previous_response_id.
	resp, body = s.post(t, "/v1/responses", fmt.Sprintf(`{"model":"weather",%s,"previous_response_id":%q,"input":[{"type":"function_call_output","call_id":%q,"output":"found"}]}`, tools, r["id"], callID))
	if got := path(decodeJSON(t, body), "output", 0, "content", 0, "text"); resp.StatusCode != 200 || got != want {
		t.Errorf("status %d: %s", resp.StatusCode, body)
	}
	// With the conversation as items, as @openai/agents sends it.
	items := fmt.Sprintf(`[{"role":"user","content":"%s"},{"type":"function_call","id":"fc_1","call_id":%q,"name":"lookup","arguments":"{\"q\":\"x\"}","status":"completed"},{"type":"function_call_output","call_id":%q,"output":[{"type":"input_text","text":"found"}]}]`, ask, callID, callID)
	resp, body = s.post(t, "/v1/responses", `{"model":"weather",`+tools+`,"input":`+items+`}`)
	if got := path(decodeJSON(t, body), "output", 0, "content", 0, "text"); resp.StatusCode != 200 || got != want || resp.Header.Get(lostHeader) != "" {
		t.Errorf("status %d: %s", resp.StatusCode, body)
	}
	sent := s.fakes.recorder.Last()
	if n := len(path(sent, "messages", 2, "tool_calls").([]any)); n != 2 {
		t.Errorf("the model saw %d calls of the round", n)
	}
}

// The Responses API's request errors.
func TestResponseErrors(t *testing.T) {
	s := newTestServer(t, providertest.Echo, map[string]string{"echo": cartridgeOn("openai", "")}, Options{})
	cases := []struct{ body, want string }{
		{`{"model":"echo","input":"x","tools":[{"type":"web_search"}]}`, `"param":"tools[0].type"`},
		{`{"model":"echo","input":[{"type":"item_reference","id":"x"}]}`, `"param":"input[0].type"`},
		{`{"model":"echo","input":[{"type":"function_call_output","call_id":"nope","output":"x"}]}`, `"param":"input[0].call_id"`},
		{`{"model":"echo","input":"x","conversation":"conv_1"}`, `"param":"conversation"`},
		{`{"model":"echo"}`, `"param":"input"`},
		{`{"model":"echo","input":"x","previous_response_id":"resp_nope"}`, `"code":"previous_response_not_found"`},
	}
	for _, tc := range cases {
		resp, body := s.post(t, "/v1/responses", tc.body)
		if resp.StatusCode != 400 || !strings.Contains(body, tc.want) {
			t.Errorf("%s: status %d: %s", tc.body, resp.StatusCode, body)
		}
	}
	resp, body := s.post(t, "/v1/responses", `{"model":"nope","input":"x"}`)
	if resp.StatusCode != 404 || !strings.Contains(body, `"code":"model_not_found"`) {
		t.Errorf("status %d: %s", resp.StatusCode, body)
	}
}

// The events of a streamed function call, field for field.
func TestResponseStreamCallEvents(t *testing.T) {
	s := newTestServer(t, providertest.Echo, map[string]string{"echo": cartridgeOn("openai", "")}, Options{})
	tools := `"tools":[{"type":"function","name":"lookup","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}]`
	_, body := s.post(t, "/v1/responses", `{"model":"echo","stream":true,`+tools+`,"input":"call lookup {\"q\":\"x\"}"}`)
	events := readSSE(t, body)
	fc := regexp.MustCompile(`"fc_[a-z2-7]{24}"`)
	var got []string
	for _, ev := range events[2 : len(events)-1] {
		got = append(got, fc.ReplaceAllString(normJSON(t, ev.Data), `"fc_ID"`))
	}
	want := []string{
		`{"item":{"arguments":"","call_id":"call_1","id":"fc_ID","name":"lookup","status":"in_progress","type":"function_call"},"output_index":0,"sequence_number":2,"type":"response.output_item.added"}`,
		`{"delta":"{\"q\":\"x\"}","item_id":"fc_ID","output_index":0,"sequence_number":3,"type":"response.function_call_arguments.delta"}`,
		`{"arguments":"{\"q\":\"x\"}","item_id":"fc_ID","name":"lookup","output_index":0,"sequence_number":4,"type":"response.function_call_arguments.done"}`,
		`{"item":{"arguments":"{\"q\":\"x\"}","call_id":"call_1","id":"fc_ID","name":"lookup","status":"completed","type":"function_call"},"output_index":0,"sequence_number":5,"type":"response.output_item.done"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A text answer's part events, field for field.
	_, body = s.post(t, "/v1/responses", `{"model":"echo","stream":true,"input":"ab"}`)
	events = readSSE(t, body)
	msg := regexp.MustCompile(`"msg_[a-z2-7]{24}"`)
	got = nil
	for _, ev := range events[2 : len(events)-1] {
		got = append(got, msg.ReplaceAllString(normJSON(t, ev.Data), `"msg_ID"`))
	}
	want = []string{
		`{"item":{"content":[],"id":"msg_ID","role":"assistant","status":"in_progress","type":"message"},"output_index":0,"sequence_number":2,"type":"response.output_item.added"}`,
		`{"content_index":0,"item_id":"msg_ID","output_index":0,"part":{"annotations":[],"logprobs":[],"text":"","type":"output_text"},"sequence_number":3,"type":"response.content_part.added"}`,
		`{"content_index":0,"delta":"ech","item_id":"msg_ID","logprobs":[],"output_index":0,"sequence_number":4,"type":"response.output_text.delta"}`,
		`{"content_index":0,"delta":"o: ","item_id":"msg_ID","logprobs":[],"output_index":0,"sequence_number":5,"type":"response.output_text.delta"}`,
		`{"content_index":0,"delta":"ab","item_id":"msg_ID","logprobs":[],"output_index":0,"sequence_number":6,"type":"response.output_text.delta"}`,
		`{"content_index":0,"item_id":"msg_ID","logprobs":[],"output_index":0,"sequence_number":7,"text":"echo: ab","type":"response.output_text.done"}`,
		`{"content_index":0,"item_id":"msg_ID","output_index":0,"part":{"annotations":[],"logprobs":[],"text":"echo: ab","type":"output_text"},"sequence_number":8,"type":"response.content_part.done"}`,
		`{"item":{"content":[{"annotations":[],"logprobs":[],"text":"echo: ab","type":"output_text"}],"id":"msg_ID","role":"assistant","status":"completed","type":"message"},"output_index":0,"sequence_number":9,"type":"response.output_item.done"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("events\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A stored response, and the server's part of a tool round, are given
// back to their owner's requests only.
func TestStoredForTheirOwner(t *testing.T) {
	owner := func(r *http.Request) string { return r.Header.Get("X-Test-Owner") }
	s := newTestServer(t, providertest.Echo, map[string]string{"weather": cartridgeOn("openai", weatherTool)}, Options{Owner: owner})
	post := func(who, path, body string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, s.URL+path, strings.NewReader(body))
		req.Header.Set("X-Test-Owner", who)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = io.Copy(&b, resp.Body)
		return resp, b.String()
	}
	_, body := post("alice", "/v1/responses", `{"model":"weather","input":"hi"}`)
	id := decodeJSON(t, body)["id"].(string)
	next := fmt.Sprintf(`{"model":"weather","previous_response_id":%q,"input":"again"}`, id)
	if resp, body := post("bob", "/v1/responses", next); resp.StatusCode != 400 || !strings.Contains(body, "previous_response_not_found") {
		t.Errorf("bob read alice's response: %d %s", resp.StatusCode, body)
	}
	if resp, _ := post("alice", "/v1/responses", next); resp.StatusCode != 200 {
		t.Errorf("alice: status %d", resp.StatusCode)
	}
	tools := `"tools":[{"type":"function","function":{"name":"lookup"}}]`
	ask := `{"role":"user","content":"call get-weather {\"city\":\"Paris\"}; lookup"}`
	_, body = post("alice", "/v1/chat/completions", `{"model":"weather",`+tools+`,"messages":[`+ask+`]}`)
	call := assembled(t, body, false).calls[0]
	again := fmt.Sprintf(`{"model":"weather",%s,"messages":[%s,{"role":"assistant","tool_calls":[{"id":%q,"type":"function","function":{"name":"lookup","arguments":"{}"}}]},{"role":"tool","tool_call_id":%q,"content":"found"}]}`, tools, ask, call.ID, call.ID)
	if resp, _ := post("bob", "/v1/chat/completions", again); resp.Header.Get(lostHeader) != "1" {
		t.Errorf("bob got alice's round")
	}
	if resp, _ := post("alice", "/v1/chat/completions", again); resp.Header.Get(lostHeader) != "" {
		t.Errorf("alice lost her round")
	}
}

// The stored responses are listed for the server's operator, the newest
// first, with their model, status, creation time and tokens, never their
// text; a response the client asked not to store, or deleted, is not.
func TestStoredResponsesListed(t *testing.T) {
	s := newTestServer(t, providertest.Echo, map[string]string{"echo": cartridgeOn("openai", "")}, Options{})
	var ids []string
	for _, body := range []string{`{"model":"echo","input":"first secret words"}`, `{"model":"echo","input":"not kept","store":false}`, `{"model":"echo","input":"second secret words","stream":true}`} {
		resp, b := s.post(t, "/v1/responses", body)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		ids = append(ids, regexp.MustCompile(`resp_[a-z2-7]{24}`).FindString(b))
	}
	l, err := s.h.StoredResponses(t.Context(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 2 || l[0].ID != ids[2] || l[1].ID != ids[0] {
		t.Fatalf("listed %+v, want %s then %s", l, ids[2], ids[0])
	}
	for _, e := range l {
		if e.Label != "echo" || e.Status != "completed" || e.Tokens <= 0 || e.Size <= 0 || time.Since(e.Created) > time.Minute {
			t.Errorf("listed %+v", e)
		}
		if b, _ := json.Marshal(e); strings.Contains(string(b), "secret") {
			t.Errorf("the listing shows a response's text: %s", b)
		}
	}
	req, _ := http.NewRequest(http.MethodDelete, s.URL+"/v1/responses/"+ids[0], nil)
	del, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	del.Body.Close()
	if l, err := s.h.StoredResponses(t.Context(), 10); err != nil || len(l) != 1 || l[0].ID != ids[2] {
		t.Fatalf("after the delete: %+v %v", l, err)
	}
}
