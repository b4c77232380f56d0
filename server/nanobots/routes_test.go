package nanobots

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/provider/providertest"
)

var cartridges = map[string]string{
	"writer.yml": cart("symbol: ✍️, name: Writer, author: Tests, version: 1.0.0, description: Writes things"),
	"plain.yml":  cart("name: Plain"),
	"team/translator.yml": cart("name: Translator, author: Team",
		"interfaces: {eval: {output: {prefix: '>> ', suffix: ' <<'}}, repl: {prompt: '? '}}"),
	"noname.yml": cart("author: Nobody"),
	"booter.yml": cart("name: Booter, author: Tests",
		"behaviors: {boot: {instruction: say hello}}"),
	"nokey.yml":  "meta: {name: No key}\nprovider: {id: openai, credentials: {access-token: ENV/MISSING_KEY}}\n",
	"broken.yml": "meta: {name: Broken}\nprovider: {id: nope}\n",
}

// Every route's JSON, as golden files (times and ids normalised).
func TestRoutesGolden(t *testing.T) {
	f := newFixture(t, setup{files: cartridges})
	for _, tc := range []struct {
		file, method, path, body string
		status                   int
	}{
		{"index.json", "GET", "/", "", 200},
		{"cartridges.json", "GET", "/cartridges", "", 200},
		{"source_default.json", "POST", "/cartridges/source", `{"id": "-"}`, 200},
		{"source_writer.json", "POST", "/cartridges/source", `{"id": "writer"}`, 200},
		{"source_broken.json", "POST", "/cartridges/source", `{"id": "nokey"}`, 200},
		{"source_unknown.json", "POST", "/cartridges/source", `{"id": "nope"}`, 404},
		{"source_no_id.json", "POST", "/cartridges/source", `{}`, 400},
		{"run_eval.json", "POST", "/cartridges", `{"cartridge": "writer", "state": "-", "input": "hi"}`, 200},
		{"run_eval_affixes.json", "POST", "/cartridges", `{"cartridge": "team/translator", "input": "hi"}`, 200},
		{"run_repl.json", "POST", "/cartridges", `{"cartridge": "writer", "input": "hi", "as": "repl"}`, 200},
		{"run_repl_prompt.json", "POST", "/cartridges", `{"cartridge": "team/translator", "input": "hi", "as": "repl"}`, 200},
		{"run_boot_repl.json", "POST", "/cartridges", `{"cartridge": "booter", "action": "boot", "as": "repl"}`, 200},
		{"run_boot_none.json", "POST", "/cartridges", `{"cartridge": "writer", "action": "boot", "as": "repl"}`, 200},
		{"run_boot_eval.json", "POST", "/cartridges", `{"cartridge": "booter", "action": "boot"}`, 200},
		{"run_default.json", "POST", "/cartridges", `{"cartridge": "-", "state": "-", "input": "hi", "mode": "add", "prefix": "\n"}`, 200},
		{"run_unknown.json", "POST", "/cartridges", `{"cartridge": "nope", "input": "hi"}`, 404},
		{"run_failed_load.json", "POST", "/cartridges", `{"cartridge": "nokey", "input": "hi"}`, 500},
		{"run_no_input.json", "POST", "/cartridges", `{"cartridge": "writer"}`, 400},
		{"run_no_cartridge.json", "POST", "/cartridges", `{"input": "hi"}`, 400},
		{"run_bad_as.json", "POST", "/cartridges", `{"cartridge": "writer", "input": "hi", "as": "chat"}`, 400},
		{"run_bad_json.json", "POST", "/cartridges", `{"cartridge": `, 400},
		{"run_bad_state.json", "POST", "/cartridges", `{"cartridge": "writer", "input": "hi", "state": 7}`, 400},
		{"run_not_object.json", "POST", "/cartridges", `[1]`, 400},
		{"run_client_env.json", "POST", "/cartridges", `{"cartridge": {"provider": {"id": "openai", "credentials": {"address": "https://example.com", "access-token": "ENV/OPENAI_API_KEY"}}}, "input": "hi"}`, 400},
		{"stream_create.json", "POST", "/cartridges/stream", `{"cartridge": "writer", "state": "-", "input": "hi"}`, 200},
		{"stream_unknown.json", "GET", "/cartridges/stream/0123", "", 200},
		{"stream_create_error.json", "POST", "/cartridges/stream", `{"cartridge": "nope", "input": "hi"}`, 404},
		{"no_route.json", "GET", "/nope", "", 404},
	} {
		resp, body := f.do(tc.method, tc.path, tc.body)
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: status %d, want %d: %s", tc.method, tc.path, resp.StatusCode, tc.status, body)
		}
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s %s: Content-Type %q", tc.method, tc.path, ct)
		}
		if resp.Header.Get("Access-Control-Allow-Origin") != "*" {
			t.Errorf("%s %s: no Access-Control-Allow-Origin", tc.method, tc.path)
		}
		if resp.ContentLength != int64(len(body)) {
			t.Errorf("%s %s: Content-Length %d for %d bytes", tc.method, tc.path, resp.ContentLength, len(body))
		}
		if strings.Contains(body, "\x1b") {
			t.Errorf("%s %s: ANSI codes in %q", tc.method, tc.path, body)
		}
		golden(t, tc.file, f.normalize(body)+"\n")
	}
}

// A stream's polls, finished and failed, and its events.
func TestStreamGolden(t *testing.T) {
	f := newFixture(t, setup{files: cartridges, brain: func(turn providertest.Turn) providertest.Reply {
		if turn.LastUser() == "fail" {
			return providertest.Reply{Status: 400}
		}
		return providertest.Echo(turn)
	}})
	_, body := f.do("POST", "/cartridges/stream", `{"cartridge": "writer", "state": "-", "input": "hi"}`)
	id := decodeJSON(t, body)["id"].(string)
	final, _ := f.pollUntilDone(id)
	if final["output"] != "echo: hi\n" {
		t.Fatalf("output %q", final["output"])
	}
	_, body = f.do("GET", "/cartridges/stream/"+id, "")
	golden(t, "stream_finished.json", f.normalize(body)+"\n")

	resp, body := f.do("GET", "/cartridges/stream/"+id, "", "Accept", "text/event-stream")
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	golden(t, "stream_events.txt", f.normalize(body))
	_, body = f.do("GET", "/cartridges/stream/"+id, "", "Accept", "text/event-stream", "Last-Event-ID", "4")
	golden(t, "stream_events_resumed.txt", f.normalize(body))
	_, body = f.do("GET", "/cartridges/stream/nope", "", "Accept", "text/event-stream")
	golden(t, "stream_events_unknown.txt", f.normalize(body))

	_, body = f.do("POST", "/cartridges/stream", `{"cartridge": "writer", "state": "-", "input": "fail"}`)
	id = decodeJSON(t, body)["id"].(string)
	f.pollUntilDone(id)
	resp, body = f.do("GET", "/cartridges/stream/"+id, "")
	if resp.StatusCode != 500 {
		t.Errorf("failed stream: status %d", resp.StatusCode)
	}
	golden(t, "stream_failed.json", f.normalize(body)+"\n")

	// POST with Accept: text/event-stream answers with the events at once.
	// How the output is cut into events depends on timing: the events'
	// outputs add up to the answer, between the pending and the finished
	// event, with growing ids.
	_, body = f.do("POST", "/cartridges/stream", `{"cartridge": "writer", "input": "hi"}`, "Accept", "text/event-stream")
	checkPostEvents(t, f.normalize(body))
}

// Only an explicit text/event-stream selects events; */* (Obsidian) gets JSON.
func TestWantsEvents(t *testing.T) {
	for accept, want := range map[string]bool{
		"":                                    false,
		"*/*":                                 false,
		"text/*":                              false,
		"application/json":                    false,
		"text/event-stream":                   true,
		"application/json, text/event-stream": true,
		"text/event-stream;q=0":               false,
	} {
		r, _ := http.NewRequest("GET", "/", nil)
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		if got := wantsEvents(r); got != want {
			t.Errorf("Accept %q: %v", accept, got)
		}
	}
}

// A tool that asks for a confirmation is denied over HTTP: the model is
// told, and the answer says what it was told.
func TestToolDenied(t *testing.T) {
	f := newFixture(t, setup{files: map[string]string{
		"tool.yml": cart("name: Tool", "tools: [{name: random-number, lua: 'return 4'}]"),
		"free.yml": cart("name: Free", "safety: {tools: {confirmable: false}}", "tools: [{name: random-number, lua: 'return 4'}]"),
	}})
	_, body := f.do("POST", "/cartridges", `{"cartridge": "tool", "input": "call random-number {}"}`)
	out := decodeJSON(t, body)["output"].(string)
	if !strings.Contains(out, "tool random-number said: We asked the user you're chatting with for permission, but the user did not allow you to run this tool or function.") {
		t.Fatalf("output %q", out)
	}
	_, body = f.do("POST", "/cartridges", `{"cartridge": "free", "input": "call random-number {}"}`)
	if out := decodeJSON(t, body)["output"].(string); !strings.Contains(out, "tool random-number said: 4") {
		t.Fatalf("a tool without confirmation did not run: %q", out)
	}

	allowed := newFixture(t, setup{files: map[string]string{"tool.yml": cart("name: Tool", "tools: [{name: random-number, lua: 'return 4'}]")},
		server: func(o *serverOptions) { o.AllowUnconfirmed = true }})
	_, body = allowed.do("POST", "/cartridges", `{"cartridge": "tool", "input": "call random-number {}"}`)
	if out := decodeJSON(t, body)["output"].(string); !strings.Contains(out, "tool random-number said: 4") {
		t.Fatalf("--allow-unconfirmed-tools: %q", out)
	}
}

// The end user is the client's address and its NANO_BOTS_END_USER
// header: two users of one state key have two conversations.
func TestEndUserSeparatesState(t *testing.T) {
	var mu = make(chan struct{}, 1)
	var histories []int
	f := newFixture(t, setup{files: cartridges, brain: func(turn providertest.Turn) providertest.Reply {
		mu <- struct{}{}
		histories = append(histories, len(turn.Messages))
		<-mu
		return providertest.Echo(turn)
	}})
	for _, user := range []string{"vscode-alice", "vscode-alice", "vscode-bob"} {
		resp, body := f.do("POST", "/cartridges", `{"cartridge": "writer", "state": "k1", "input": "hi"}`, "NANO_BOTS_END_USER", user)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	if fmt.Sprint(histories) != "[1 3 1]" {
		t.Fatalf("messages sent per request %v: alice's second request should carry her first exchange, bob's none", histories)
	}
}

// Finished streams are forgotten after their time; the oldest finished
// go first when there are too many.
func TestStreamExpiry(t *testing.T) {
	f := newFixture(t, setup{files: cartridges, api: Options{StreamTTL: 100 * time.Millisecond, MaxStreams: 3}})
	var ids []string
	for range 4 {
		_, body := f.do("POST", "/cartridges/stream", `{"cartridge": "writer", "input": "hi"}`)
		id := decodeJSON(t, body)["id"].(string)
		f.pollUntilDone(id)
		ids = append(ids, id)
	}
	if n := f.api.kept(); n != 3 {
		t.Fatalf("%d streams kept, want 3", n)
	}
	if _, body := f.do("GET", "/cartridges/stream/"+ids[0], ""); !strings.Contains(body, `"state":"unknown"`) {
		t.Fatalf("the oldest stream was kept: %s", body)
	}
	deadline := time.Now().Add(5 * time.Second)
	for f.api.kept() > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := f.api.kept(); n != 0 {
		t.Fatalf("%d streams kept after their time", n)
	}
}

// A poll of a pending stream whose output has not changed waits for a
// change (long polling), and answers as soon as it comes.
func TestPollHold(t *testing.T) {
	f := newFixture(t, setup{files: cartridges, brain: func(providertest.Turn) providertest.Reply {
		return providertest.Reply{Chunks: []string{"a", "b"}, Delay: 300 * time.Millisecond}
	}, api: Options{PollHold: 2 * time.Second}})
	_, body := f.do("POST", "/cartridges/stream", `{"cartridge": "writer", "input": "hi"}`)
	id := decodeJSON(t, body)["id"].(string)
	start := time.Now()
	final, polls := f.pollUntilDone(id)
	if final["output"] != "ab\n" {
		t.Fatalf("output %q", final["output"])
	}
	if polls > 6 {
		t.Errorf("%d polls for a 0.6 s answer: the polls were not held", polls)
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Errorf("the answer took %v: a held poll did not answer on the change", d)
	}
}

// The text of messages is logged only when the operator asks for it.
func TestLogMessages(t *testing.T) {
	for _, on := range []bool{false, true} {
		f := newFixture(t, setup{files: cartridges, server: func(o *serverOptions) { o.LogMessages = on }})
		f.do("POST", "/cartridges", `{"cartridge": "writer", "input": "my-private-words"}`)
		_, body := f.do("POST", "/cartridges/stream", `{"cartridge": "writer", "input": "more-private-words"}`)
		f.pollUntilDone(decodeJSON(t, body)["id"].(string))
		log := f.log.String()
		for _, words := range []string{"my-private-words", "more-private-words", "echo: my-private-words"} {
			if strings.Contains(log, words) != on {
				t.Errorf("LogMessages=%v: %q in the log: %v\n%s", on, words, !on, log)
			}
		}
	}
}

// checkPostEvents checks the events of a POST /cartridges/stream that
// asked for text/event-stream.
func checkPostEvents(t *testing.T, body string) {
	t.Helper()
	var kinds []string
	var output strings.Builder
	lastID := -1
	for _, block := range strings.Split(strings.TrimSpace(body), "\n\n") {
		var kind, data string
		id := -1
		for _, line := range strings.Split(block, "\n") {
			switch {
			case strings.HasPrefix(line, "event: "):
				kind = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = strings.TrimPrefix(line, "data: ")
			case strings.HasPrefix(line, "id: "):
				fmt.Sscan(strings.TrimPrefix(line, "id: "), &id) //nolint:errcheck // checked below
			}
		}
		kinds = append(kinds, kind)
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("event %q: %v", block, err)
		}
		switch kind {
		case "stream":
			// A run quick enough to be done before the first event is
			// written shows its output there.
			output.WriteString(m["output"].(string))
			if m["state"] != "pending" && m["state"] != "finished" {
				t.Errorf("first event %v", m)
			}
		case "output":
			output.WriteString(m["output"].(string))
			if id <= lastID {
				t.Errorf("ids do not grow: %d after %d", id, lastID)
			}
			lastID = id
		case "finished":
			if m["state"] != "finished" || m["output"] != "echo: hi\n" || (lastID >= 0 && id != lastID) {
				t.Errorf("last event %v (id %d, last output id %d)", m, id, lastID)
			}
		}
	}
	if len(kinds) < 2 || kinds[0] != "stream" || kinds[len(kinds)-1] != "finished" {
		t.Errorf("events %v", kinds)
	}
	if output.String() != "echo: hi\n" {
		t.Errorf("the output events add up to %q", output.String())
	}
}

// A limit that stops an exchange before an answer is an answer that says
// so and how to go on, not a failed stream.
func TestRoundLimitAnswered(t *testing.T) {
	always := func(providertest.Turn) providertest.Reply {
		return providertest.Reply{Calls: []providertest.Call{{ID: "c", Name: "random-number", Arguments: `{"n":1}`}}}
	}
	f := newFixture(t, setup{brain: always, files: map[string]string{
		"free.yml": cart("name: Free", "safety: {tools: {confirmable: false, rounds: 2}}", "tools: [{name: random-number, lua: 'return 4'}]"),
	}})
	resp, body := f.do("POST", "/cartridges", `{"cartridge": "free", "input": "go"}`)
	out, _ := decodeJSON(t, body)["output"].(string)
	if resp.StatusCode != 200 || !strings.Contains(out, "[nb: stopped after 2 rounds of tool calls without an answer") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}
