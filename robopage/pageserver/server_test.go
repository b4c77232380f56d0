package pageserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nbots/nb/proc"
	"github.com/nbots/nb/robopage"
)

const corpus = "../../../shared/corpus/robopages"

const testPage = `description: A test page
functions:
  echo:
    description: Print a message.
    parameters:
      message: {type: string, description: The message.}
    cmdline: [echo, "${message}"]
  printf:
    description: Format.
    parameters:
      format: {type: string, description: f}
      value: {type: integer, description: v, required: false}
    cmdline: [printf, "${format}", "${value or none}"]
  fail:
    description: Exit 1.
    parameters: {}
    cmdline: ["false"]
  sleep:
    description: Sleep past the timeout.
    parameters: {}
    cmdline: [sh, -c, "echo going to sleep; sleep 30"]
  big:
    description: Print 10 MB.
    parameters: {}
    cmdline: [sh, -c, "head -c 10485760 /dev/zero | tr '\\0' x"]
  nocontainer:
    description: A missing program.
    parameters: {}
    cmdline: [nb-no-such-program]
  rendezvous:
    description: Meet another call that runs at the same time.
    parameters:
      mine: {type: string, description: the file this call creates}
      other: {type: string, description: the file it waits for}
    cmdline: [sh, -c, 'touch "$1"; while [ ! -e "$2" ]; do sleep 0.01; done; echo met', sh, "${mine}", "${other}"]
`

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newServer serves testPage (and, in folder cyber/, a second page).
func newServer(t *testing.T, ex *robopage.Executor, token string) *httptest.Server {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "tools.yml"), []byte(testPage), 0o644)
	os.MkdirAll(filepath.Join(dir, "cyber", "re"), 0o755)
	os.WriteFile(filepath.Join(dir, "cyber", "re", "strings.yml"), []byte("description: s\nfunctions:\n  strings_of:\n    description: d\n    parameters: {p: {type: string, description: d}}\n    cmdline: [echo, '${p}']\n"), 0o644)
	lib, err := robopage.Load(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if ex == nil {
		ex = &robopage.Executor{}
	}
	if ex.Environ == nil {
		ex.Environ = os.Environ()
	}
	srv := httptest.NewServer(&Server{Library: lib, Executor: ex, Token: token, Log: quietLog()})
	t.Cleanup(srv.Close)
	return srv
}

func do(t *testing.T, method, url, contentType, body string, header ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func jsonEqual(t *testing.T, what, want, got string) {
	t.Helper()
	var w, g any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: want: %v", what, err)
	}
	if err := json.Unmarshal([]byte(got), &g); err != nil {
		t.Fatalf("%s: got %q: %v", what, got, err)
	}
	if d := cmp.Diff(w, g); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
}

// Each flavor's JSON for the corpus's utilities/web.yml, as the reference.
func TestFlavorsMatchReference(t *testing.T) {
	lib, err := robopage.Load(corpus, "")
	if err != nil {
		t.Skip("corpus:", err)
	}
	srv := httptest.NewServer(&Server{Library: lib, Executor: &robopage.Executor{Environ: os.Environ()}, Log: quietLog()})
	defer srv.Close()
	for _, flavor := range []string{"openai", "rigging", "nerve"} {
		want, err := os.ReadFile("testdata/web." + flavor + ".json")
		if err != nil {
			t.Fatal(err)
		}
		code, got := do(t, "GET", srv.URL+"/utilities?flavor="+flavor, "", "")
		if code != 200 {
			t.Fatalf("%s: %d %s", flavor, code, got)
		}
		jsonEqual(t, flavor, string(want), got)
	}
	code, got := do(t, "GET", srv.URL+"/utilities", "", "")
	want, _ := os.ReadFile("testdata/web.openai.json")
	if code != 200 {
		t.Fatal(code)
	}
	jsonEqual(t, "no flavor", string(want), got)

	// Whole library: 55 functions, 28 pages.
	for flavor, n := range map[string]int{"openai": 55, "OpenAI": 55, "RIGGING": 28, "Nerve": 28} {
		code, body := do(t, "GET", srv.URL+"/?flavor="+flavor, "", "")
		var list []any
		json.Unmarshal([]byte(body), &list)
		if code != 200 || len(list) != n {
			t.Errorf("%s: %d, %d entries, want %d", flavor, code, len(list), n)
		}
	}
	// Nerve's documented multi-segment filter.
	code, body := do(t, "GET", srv.URL+"/cybersecurity/reverse-engineering?flavor=nerve", "", "")
	var groups []struct{ Name string }
	json.Unmarshal([]byte(body), &groups)
	if code != 200 || len(groups) != 3 || groups[0].Name != "file" {
		t.Errorf("multi-segment filter: %d %s", code, body)
	}
}

func TestRoutes(t *testing.T) {
	srv := newServer(t, nil, "")
	tests := []struct {
		method, path, ctype, body string
		code                      int
		want                      string
	}{
		{"GET", "/?flavor=unknown", "", "", 400, "unknown flavor: unknown"},
		{"GET", "/?flavor=", "", "", 400, "unknown flavor: "},
		{"GET", "/process", "", "", 200, "[]"},
		{"GET", "/no_such_page", "", "", 200, "[]"},
		{"POST", "/", "application/json", "[]", 405, ""},
		{"POST", "/x", "application/json", "[]", 405, ""},
		{"PUT", "/process", "application/json", "[]", 405, ""},
		{"POST", "/process", "application/json", "[]", 200, "[]"},
		{"POST", "/process", "text/plain", "[]", 400, "Content type error: send the calls with Content-Type: application/json"},
		{"POST", "/process", "application/json", "{", 400, "Json deserialize error: unexpected end of JSON input"},
		{"POST", "/process", "application/json", "{}", 400, "Json deserialize error: the body must be a JSON array of calls, not object"},
		{"POST", "/process", "application/json", `[{"function":{"arguments":{}}}]`, 400, "Json deserialize error: call 1: missing field `name`"},
		{"POST", "/process", "application/json", `[{"function":{"name":"echo"}}]`, 400, "Json deserialize error: call 1: missing field `arguments`"},
		{"POST", "/process", "application/json", `[{"function":{"name":"echo","arguments":{"message":["a"]}}}]`, 400, "Json deserialize error: call 1: argument message must be text, a number or a boolean, not a list or an object"},
		{"POST", "/process", "application/json", `[{"function":{"name":"nope","arguments":{}}}]`, 400, "error executing call: function nope not found"},
		{"POST", "/process", "application/json", `[{"function":{"name":"echo","arguments":{}}}]`, 400, "error executing call: missing required argument message for function echo"},
		{"POST", "/process", "application/json", `[{"function":{"name":"echo","arguments":{"message":"a","x":"b"}}}]`, 400, "error executing call: unknown argument x for function echo"},
		{"POST", "/process", "application/json", `[{"function":{"name":"nocontainer","arguments":{}}}]`, 400, "error executing call: container required for function nocontainer"},
		{"POST", "/process", "application/json", `[{"function":{"name":"echo","arguments":{"message":"-e"}}}]`, 400, "error executing call: argument message of function echo starts with \"-\" (\"-e\") and would be read as an option: pass a value that does not start with \"-\" (a page allows it with `allow: [leading-dash]` on the parameter)"},
		{"POST", "/process", "application/json", `[{"function":{"name":"echo","arguments":{"message":"-5"}}},{"function":{"name":"strings_of","arguments":{"p":"../../etc/passwd"}}}]`, 400, "error executing call: argument p of function strings_of has a \"..\" path segment (\"../../etc/passwd\") and could reach outside the folder the page means: pass a path without \"..\" (a page allows it with `allow: [parent-dir]` on the parameter)"},
		{"POST", "/process", "application/json", strings.Repeat(" ", MaxBody+1), 413, fmt.Sprintf("JSON payload (%d bytes) is larger than allowed (limit: 2097152 bytes).", MaxBody+1)},
		{"GET", "/", "", "", 400, "Origin is not allowed to make this request"}, // with Origin, below
	}
	for i, tt := range tests {
		var hdr []string
		if i == len(tests)-1 {
			hdr = []string{"Origin", "http://evil.example"}
		}
		code, body := do(t, tt.method, srv.URL+tt.path, tt.ctype, tt.body, hdr...)
		if code != tt.code || body != tt.want {
			t.Errorf("%s %s %.40q: %d %q, want %d %q", tt.method, tt.path, tt.body, code, body, tt.code, tt.want)
		}
	}
}

func TestProcess(t *testing.T) {
	// No short timeout here: these calls must not depend on the machine's speed.
	srv := newServer(t, nil, "")
	body := `[
	 {"id":"call_1","type":"function","function":{"name":"echo","arguments":{"message":"test1"}}},
	 {"id":null,"function":{"name":"echo","arguments":{"message":"test2"}}},
	 {"function":{"name":"printf","arguments":"{\"format\":\"%s-%s\",\"value\":42}"}},
	 {"id":"call_4","type":"function","function":{"name":"printf","arguments":{"format":"[%s|%s]","value":null}}},
	 {"id":"call_5","function":{"name":"fail","arguments":{}}},
	 {"id":"call_6","function":{"name":"strings_of","arguments":{"p":true}}}
	]`
	code, got := do(t, "POST", srv.URL+"/process", "application/json", body)
	if code != 200 {
		t.Fatalf("%d %s", code, got)
	}
	jsonEqual(t, "process", `[
	 {"role":"tool","call_id":"call_1","content":"test1\n"},
	 {"role":"tool","call_id":null,"content":"test2\n"},
	 {"role":"tool","call_id":null,"content":"42-"},
	 {"role":"tool","call_id":"call_4","content":"[none|]"},
	 {"role":"tool","call_id":"call_5","content":"EXIT CODE: exit status: 1"},
	 {"role":"tool","call_id":"call_6","content":"true\n"}
	]`, got)

}

// The timeout and the output cap, each on its own executor so that
// neither depends on how fast the machine is: the 10 MB of big never
// meet a timeout, and sleep's outcome does not depend on whether its
// shell printed before the deadline. (Both once shared one 500 ms
// timeout, and big failed when a loaded machine took longer.)
func TestProcessLimits(t *testing.T) {
	timed := newServer(t, &robopage.Executor{Timeout: 500 * time.Millisecond, KillGrace: 200 * time.Millisecond}, "")
	start := time.Now()
	code, got := do(t, "POST", timed.URL+"/process", "application/json", `[{"id":"a","function":{"name":"sleep","arguments":{}}}]`)
	if code != 200 {
		t.Fatalf("%d %s", code, got)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %v", took)
	}
	var res []Result
	json.Unmarshal([]byte(got), &res)
	if len(res) != 1 || *res[0].CallID != "a" {
		t.Fatalf("results %.200s", got)
	}
	// sh has no SIGTERM handler: as the init of a pid namespace it gets
	// SIGKILL (see package proc); otherwise SIGTERM ends it.
	status := "signal: 15 (SIGTERM)"
	if m := proc.Detect(); m == proc.PIDNamespace || m == proc.UserNamespace {
		status = "signal: 9 (SIGKILL)"
	}
	note := "nb: timed out after 500ms: the command and everything it started were stopped"
	if c := res[0].Content; c != "EXIT CODE: "+status+"\ngoing to sleep\n\n"+note && c != "EXIT CODE: "+status+"\n"+note {
		t.Errorf("timeout content %q, want EXIT CODE: %s, perhaps going to sleep, then %q", c, status, note)
	}

	capped := newServer(t, &robopage.Executor{Timeout: -1, MaxOutput: 1 << 20}, "")
	code, got = do(t, "POST", capped.URL+"/process", "application/json", `[{"id":"b","function":{"name":"big","arguments":{}}}]`)
	if code != 200 {
		t.Fatalf("%d %.200s", code, got)
	}
	res = nil
	json.Unmarshal([]byte(got), &res)
	if len(res) != 1 || *res[0].CallID != "b" {
		t.Fatalf("results %.200s", got)
	}
	if want := strings.Repeat("x", 1<<20) + "\nnb: stdout cut to its first 1048576 bytes of 10485760"; res[0].Content != want {
		t.Errorf("capped content: %d bytes, ends %q", len(res[0].Content), res[0].Content[max(0, len(res[0].Content)-60):])
	}
}

// The calls of a batch run at the same time: each of these two waits
// for the other to start, which never happens if they run one by one.
func TestProcessBatchConcurrent(t *testing.T) {
	srv := newServer(t, &robopage.Executor{Timeout: 20 * time.Second, Workers: 2}, "")
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	code, got := do(t, "POST", srv.URL+"/process", "application/json", fmt.Sprintf(`[
	 {"id":"1","function":{"name":"rendezvous","arguments":{"mine":%q,"other":%q}}},
	 {"id":"2","function":{"name":"rendezvous","arguments":{"mine":%q,"other":%q}}}]`, a, b, b, a))
	if code != 200 {
		t.Fatalf("%d %s", code, got)
	}
	jsonEqual(t, "rendezvous", `[{"role":"tool","call_id":"1","content":"met\n"},{"role":"tool","call_id":"2","content":"met\n"}]`, got)
}

// 200 concurrent calls, each in its own request, all answered.
func TestProcessConcurrent(t *testing.T) {
	srv := newServer(t, &robopage.Executor{}, "")
	var wg sync.WaitGroup
	errs := make(chan string, 200)
	for i := 0; i < 200; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, body := do(t, "POST", srv.URL+"/process", "application/json", fmt.Sprintf(`[{"id":"%d","function":{"name":"echo","arguments":{"message":"m%d"}}}]`, i, i))
			if want := fmt.Sprintf(`[{"role":"tool","call_id":"%d","content":"m%d\n"}]`, i, i); code != 200 || body != want {
				errs <- fmt.Sprintf("%d %s", code, body)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestToken(t *testing.T) {
	srv := newServer(t, nil, "s3cret")
	if code, body := do(t, "GET", srv.URL+"/", "", ""); code != 401 || !strings.Contains(body, "Bearer") {
		t.Errorf("no token: %d %s", code, body)
	}
	if code, _ := do(t, "GET", srv.URL+"/", "", "", "Authorization", "Bearer wrong"); code != 401 {
		t.Errorf("wrong token: %d", code)
	}
	for _, auth := range []string{"Bearer s3cret", "bearer s3cret", "Bearer  s3cret"} {
		if code, _ := do(t, "GET", srv.URL+"/", "", "", "Authorization", auth); code != 200 {
			t.Errorf("%q: %d", auth, code)
		}
	}
}

func TestCheckAddress(t *testing.T) {
	tests := []struct {
		addr   string
		remote bool
		token  string
		ok     bool
	}{
		{"127.0.0.1:8000", false, "", true},
		{"localhost:8000", false, "", true},
		{"[::1]:8000", false, "", true},
		{"127.0.0.2:0", false, "", true},
		{"0.0.0.0:8000", false, "", false},
		{":8000", false, "", false},
		{"192.168.1.2:8000", true, "", false},
		{"0.0.0.0:8000", true, "t", true},
		{"nonsense", false, "", false},
	}
	for _, tt := range tests {
		err := CheckAddress(tt.addr, tt.remote, tt.token)
		if (err == nil) != tt.ok {
			t.Errorf("CheckAddress(%q, %v, %q) = %v", tt.addr, tt.remote, tt.token, err)
		}
	}
}

// CheckAddress's refusals are typed, and name no flag: the front-end
// words the advice with its own.
func TestCheckAddressTyped(t *testing.T) {
	for _, tt := range []struct {
		remote     bool
		needsToken bool
	}{{false, false}, {true, true}} {
		err := CheckAddress("0.0.0.0:8000", tt.remote, "")
		var ae *AddressError
		if !errors.As(err, &ae) || ae.Addr != "0.0.0.0:8000" || ae.NeedsToken != tt.needsToken {
			t.Errorf("CheckAddress(remote %v) = %#v, want an *AddressError, NeedsToken %v", tt.remote, err, tt.needsToken)
		}
		if err != nil && strings.Contains(err.Error(), "--") {
			t.Errorf("the library's message names a flag: %q", err)
		}
	}
}
