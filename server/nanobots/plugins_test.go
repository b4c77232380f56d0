package nanobots

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/provider/providertest"
)

// The editor plugins' requests, replayed byte for byte as their HTTP
// libraries write them (../../shared/reference/editor-plugins.md §2):
// each does what its plugin does (menu, status bar, stream and polls, or
// one evaluation) and inserts into its "document" what the plugin would.

// slowEcho answers "echo: <message>" in pieces of 3 bytes, 5 ms apart,
// so the plugins see a pending stream grow.
func slowEcho(t providertest.Turn) providertest.Reply {
	r := providertest.Echo(t)
	r.Delay = 5 * time.Millisecond
	return r
}

const pluginInput = "Olá 😀 <b>&\"x\""

// wantDocument is what each plugin inserts: the eval output, plain text.
const wantDocument = "echo: " + pluginInput + "\n"

// sublime is Python's http.client as nanobot.py uses it: a new connection
// per request, json.dumps bodies (", " and ": " separators, non-ASCII as
// \u escapes, astral characters as surrogate pairs), and GETs that carry
// the body null.
type sublime struct{ f *fixture }

func (p sublime) request(method, path, body string) (int, map[string]any, []any) {
	p.f.t.Helper()
	c := p.f.dial()
	defer c.conn.Close()
	head := fmt.Sprintf("%s %s HTTP/1.1\nHost: %s\nAccept-Encoding: identity\nContent-Length: %d\nContent-type: application/json\nNANO_BOTS_END_USER: sublime-text-anonymous\n",
		method, path, p.f.addr, len(body))
	resp, text := c.send(head, body, method)
	if resp.StatusCode != 200 {
		// Only exactly 200 is parsed.
		return resp.StatusCode, map[string]any{"output": fmt.Sprintf("Request failed with status code: %d", resp.StatusCode)}, nil
	}
	if strings.HasPrefix(text, "[") {
		var list []any
		mustJSON(p.f.t, text, &list)
		return 200, nil, list
	}
	var m map[string]any
	mustJSON(p.f.t, text, &m)
	return 200, m, nil
}

func (p sublime) evaluate(stream bool) string {
	t := p.f.t
	_, _, menu := p.request("GET", "/cartridges", "null")
	checkMenu(t, menu, true)
	_, src, _ := p.request("POST", "/cartridges/source", `{"id": "-"}`)
	checkSource(t, src)
	body := `{"cartridge": "-", "state": "-", "input": "Ol\u00e1 \ud83d\ude00 <b>&\"x\"", "mode": "add", "prefix": "\n"}`
	if !stream {
		status, m, _ := p.request("POST", "/cartridges", body)
		if status != 200 {
			t.Fatalf("POST /cartridges: %d %v", status, m)
		}
		return m["output"].(string)
	}
	status, m, _ := p.request("POST", "/cartridges/stream", body)
	if status != 200 || m["id"] == nil || m["id"] == "" {
		t.Fatalf("No Stream ID received: %d %v", status, m)
	}
	return poll(t, func() (int, map[string]any) {
		status, m, _ := p.request("GET", "/cartridges/stream/"+m["id"].(string), "null")
		return status, m
	})
}

// vscode is node's http with a keep-alive agent, as nanobot.js uses it:
// one connection, POST bodies written without a length (chunked), GETs
// without a body.
type vscode struct {
	f *fixture
	c *rawConn
}

func (p *vscode) request(method, path, body string) map[string]any {
	p.f.t.Helper()
	if p.c == nil {
		p.c = p.f.dial()
	}
	head := fmt.Sprintf("%s %s HTTP/1.1\nContent-Type: application/json\nNANO_BOTS_END_USER: vscode-anonymous\nHost: %s\nConnection: keep-alive\n", method, path, p.f.addr)
	payload := ""
	if method == "POST" {
		head += "Transfer-Encoding: chunked\n"
		payload = fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
	}
	resp, text := p.c.send(head, payload, method)
	// The status is ignored; every body goes through JSON.parse.
	_ = resp
	var v map[string]any
	if strings.HasPrefix(text, "[") {
		var list []any
		mustJSON(p.f.t, text, &list)
		return map[string]any{"list": list}
	}
	mustJSON(p.f.t, text, &v)
	return v
}

func (p *vscode) evaluate(stream bool) string {
	t := p.f.t
	checkMenu(t, p.request("GET", "/cartridges", "")["list"].([]any), false)
	checkSource(t, p.request("POST", "/cartridges/source", `{"id":"-"}`))
	body := `{"cartridge":"-","state":"-","input":"` + strings.ReplaceAll(pluginInput, `"`, `\"`) + `","mode":"add","prefix":"\n"}`
	if !stream {
		return p.request("POST", "/cartridges", body)["output"].(string)
	}
	id, _ := p.request("POST", "/cartridges/stream", body)["id"].(string)
	if id == "" {
		t.Fatal("No Stream ID received.")
	}
	return poll(t, func() (int, map[string]any) { return 200, p.request("GET", "/cartridges/stream/"+id, "") })
}

// obsidian is Chromium's fetch in a page of origin app://obsidian.md:
// every request is preflighted (custom headers), with Accept: */*, and the
// optional NANO_BOTS_CARTRIDGES_PATH header, which the server ignores.
type obsidian struct {
	f *fixture
	c *rawConn
}

const chromium = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) obsidian/1.5.3 Chrome/114.0.5735.289 Electron/25.8.1 Safari/537.36"

func (p *obsidian) request(method, path, body string) (int, map[string]any, []any) {
	t := p.f.t
	t.Helper()
	if p.c == nil {
		p.c = p.f.dial()
	}
	pre := fmt.Sprintf("OPTIONS %s HTTP/1.1\nHost: %s\nConnection: keep-alive\nAccept: */*\nAccess-Control-Request-Method: %s\nAccess-Control-Request-Headers: content-type,nano_bots_cartridges_path,nano_bots_end_user\nOrigin: app://obsidian.md\nUser-Agent: %s\nSec-Fetch-Mode: cors\nSec-Fetch-Site: cross-site\nSec-Fetch-Dest: empty\nAccept-Encoding: gzip, deflate, br\nAccept-Language: en-US\n",
		path, p.f.addr, method, chromium)
	resp, _ := p.c.send(pre, "", "OPTIONS")
	if resp.StatusCode/100 != 2 || resp.Header.Get("Access-Control-Allow-Origin") == "" ||
		!allowsHeaders(resp.Header.Get("Access-Control-Allow-Headers"), "content-type", "nano_bots_cartridges_path", "nano_bots_end_user") ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Methods"), method) {
		t.Fatalf("preflight of %s %s refused: %d %v", method, path, resp.StatusCode, resp.Header)
	}
	head := fmt.Sprintf("%s %s HTTP/1.1\nHost: %s\nConnection: keep-alive\n", method, path, p.f.addr)
	if method == "POST" {
		head += fmt.Sprintf("Content-Length: %d\n", len(body))
	}
	head += fmt.Sprintf("nano_bots_cartridges_path: /home/me/vault/cartridges:/home/me/vault/Cartridges\nnano_bots_end_user: obsidian-anonymous\nUser-Agent: %s\nContent-Type: application/json\nAccept: */*\nOrigin: app://obsidian.md\nSec-Fetch-Site: cross-site\nSec-Fetch-Mode: cors\nSec-Fetch-Dest: empty\nAccept-Encoding: gzip, deflate, br\nAccept-Language: en-US\n", chromium)
	resp, text := p.c.send(head, body, method)
	if resp.Header.Get("Access-Control-Allow-Origin") == "" {
		// The page would see only "Failed to fetch".
		t.Fatalf("%s %s: no Access-Control-Allow-Origin on a %d", method, path, resp.StatusCode)
	}
	// response.json() first: a body that is not JSON is an error.
	if strings.HasPrefix(text, "[") {
		var list []any
		mustJSON(t, text, &list)
		return resp.StatusCode, nil, list
	}
	var m map[string]any
	mustJSON(t, text, &m)
	return resp.StatusCode, m, nil
}

func (p *obsidian) evaluate(stream bool) string {
	t := p.f.t
	_, _, menu := p.request("GET", "/cartridges", "")
	checkMenu(t, menu, false)
	_, src, _ := p.request("POST", "/cartridges/source", `{"id":"-"}`)
	checkSource(t, src)
	body := `{"cartridge":"-","state":"-","input":"` + strings.ReplaceAll(pluginInput, `"`, `\"`) + `","mode":"add","prefix":"\n"}`
	if !stream {
		status, m, _ := p.request("POST", "/cartridges", body)
		if status/100 != 2 {
			t.Fatalf("POST /cartridges: %d %v", status, m)
		}
		return m["output"].(string)
	}
	_, m, _ := p.request("POST", "/cartridges/stream", body)
	id, _ := m["id"].(string)
	if id == "" {
		t.Fatal("No Stream ID received.")
	}
	return poll(t, func() (int, map[string]any) {
		status, m, _ := p.request("GET", "/cartridges/stream/"+id, "")
		return status, m
	})
}

func allowsHeaders(allowed string, names ...string) bool {
	if allowed == "*" {
		return true
	}
	for _, n := range names {
		found := false
		for _, a := range strings.Split(allowed, ",") {
			if strings.EqualFold(strings.TrimSpace(a), n) {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func mustJSON(t *testing.T, text string, v any) {
	t.Helper()
	if err := jsonUnmarshal(text, v); err != nil {
		t.Fatalf("Invalid JSON response: %v: %q", err, text)
	}
}

// checkMenu builds the plugins' menu: every entry needs a meta object
// with a name, the symbol key (Sublime reads it with []) and an id.
func checkMenu(t *testing.T, list []any, sublimeStrict bool) {
	t.Helper()
	if len(list) == 0 {
		t.Fatal("empty menu")
	}
	for _, e := range list {
		entry, _ := e.(map[string]any)
		meta, ok := entry["meta"].(map[string]any)
		if !ok {
			t.Fatalf("an entry without meta: %v", e)
		}
		if _, ok := meta["name"].(string); !ok {
			t.Fatalf("an entry without meta.name: %v", e)
		}
		sym, ok := meta["symbol"]
		if !ok {
			t.Fatalf("KeyError: 'symbol' in %v", e)
		}
		if s, _ := sym.(string); sublimeStrict && s == "" {
			t.Fatalf("an empty symbol breaks Sublime's menu: %v", e)
		}
		system, _ := entry["system"].(map[string]any)
		if id, _ := system["id"].(string); id == "" {
			t.Fatalf("an entry without system.id: %v", e)
		}
	}
}

func checkSource(t *testing.T, m map[string]any) {
	t.Helper()
	meta, ok := m["meta"].(map[string]any)
	if !ok || meta["name"] == nil {
		t.Fatalf("the status bar cannot be drawn from %v", m)
	}
	if _, ok := meta["symbol"]; !ok {
		t.Fatalf("no symbol key in %v", m)
	}
}

// poll runs the plugins' loop: insert what is new in output, stop only
// on "finished"; the output must only grow.
func poll(t *testing.T, get func() (int, map[string]any)) string {
	t.Helper()
	document, previous := "", ""
	for n := 0; ; n++ {
		if n > 200000 {
			t.Fatal("the stream never finished")
		}
		status, m := get()
		if status != 200 {
			t.Fatalf("a poll answered %d (Sublime parses only 200): %v", status, m)
		}
		output, ok := m["output"].(string)
		if !ok {
			t.Fatalf("output is not a string: %v", m)
		}
		if output != previous {
			if !strings.HasPrefix(output, previous) {
				t.Fatalf("output rewritten: %q then %q", previous, output)
			}
			document += output[len(previous):]
			previous = output
		}
		if m["state"] == "finished" {
			return document
		}
	}
}

func TestPlugins(t *testing.T) {
	for _, stream := range []bool{true, false} {
		for name, mk := range map[string]func(*fixture) interface{ evaluate(bool) string }{
			"sublime":  func(f *fixture) interface{ evaluate(bool) string } { return sublime{f} },
			"vscode":   func(f *fixture) interface{ evaluate(bool) string } { return &vscode{f: f} },
			"obsidian": func(f *fixture) interface{ evaluate(bool) string } { return &obsidian{f: f} },
		} {
			t.Run(fmt.Sprintf("%s/stream=%v", name, stream), func(t *testing.T) {
				// No hold: the plugins' tight loops are what the server must take.
				f := newFixture(t, setup{files: cartridges, brain: slowEcho, api: Options{PollHold: -1}})
				doc := mk(f).evaluate(stream)
				if doc != wantDocument {
					t.Fatalf("document %q, want %q", doc, wantDocument)
				}
				if strings.Contains(f.log.String(), "path=/cartridges/stream/") {
					t.Errorf("polls are logged at info level:\n%s", f.log)
				}
			})
		}
	}
}

// An unknown cartridge: Obsidian shows error.message (the answer must be
// JSON with CORS headers); the others get a non-200 and stop.
func TestPluginErrors(t *testing.T) {
	f := newFixture(t, setup{files: cartridges})
	p := &obsidian{f: f}
	status, m, _ := p.request("POST", "/cartridges/source", `{"id":"gone"}`)
	if status != 404 || m["error"].(map[string]any)["message"] != `there is no cartridge "gone" on this server: GET /cartridges (or /v1/models) lists them` {
		t.Fatalf("%d %v", status, m)
	}
	status, m, _ = p.request("POST", "/cartridges/stream", `{"cartridge":"nokey","state":"-","input":"x"}`)
	if status != 500 || !strings.Contains(m["error"].(map[string]any)["message"].(string), "MISSING_KEY") {
		t.Fatalf("%d %v", status, m)
	}
}

// Polls at full speed are cheap: the log stays quiet, and a poll of a
// finished stream answers at once.
func TestPollsAreQuiet(t *testing.T) {
	f := newFixture(t, setup{files: cartridges})
	_, body := f.do("POST", "/cartridges/stream", `{"cartridge": "writer", "input": "hi"}`)
	id := decodeJSON(t, body)["id"].(string)
	f.pollUntilDone(id)
	c := f.dial()
	for range 500 {
		resp, _ := c.send("GET /cartridges/stream/"+id+" HTTP/1.1\nHost: localhost\n", "", "GET")
		if resp.StatusCode != 200 {
			t.Fatal(resp.Status)
		}
	}
	if n := strings.Count(f.log.String(), "path=/cartridges/stream/"); n > 0 {
		t.Errorf("%d log lines for 500 polls:\n%s", n, f.log)
	}
}

// Obsidian keeps a path in its address: "http://localhost:3048/" gives
// //cartridges, which must not be redirected (a preflighted request
// cannot follow a redirect).
func TestObsidianTrailingSlash(t *testing.T) {
	f := newFixture(t, setup{files: cartridges})
	p := &obsidian{f: f}
	status, _, list := p.request("GET", "//cartridges", "")
	if status != 200 || len(list) == 0 {
		t.Fatalf("%d %v", status, list)
	}
	status, m, _ := p.request("POST", "//cartridges/source", `{"id":"-"}`)
	if status != 200 {
		t.Fatalf("%d %v", status, m)
	}
}
