package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

// The tests in this file run nb under a pseudo-terminal, as a user would:
// confirmations answered on the terminal, the REPL's line editor, Ctrl-C.
// nb is this test binary started as "nb" (testscript's TestMain runs Main
// for that name). Every wait is bounded; a stuck nb is killed.

const ptyTimeout = 15 * time.Second

// slowWord makes the fake answer slowly, so Ctrl-C lands mid-stream.
const slowWord = "slow"

// slowCall makes the fake call random-number after a second and a half,
// so a line can be typed while the round runs.
const slowCall = "call random-number slowly"

// ptyBrain echoes, answers "slow" with a long slow stream, and calls tools
// as providertest.Echo does.
func ptyBrain(t providertest.Turn) providertest.Reply {
	if t.Last().Role == "user" && t.LastUser() == "wait 3s" {
		time.Sleep(3 * time.Second)
	}
	if t.Last().Role == "user" && t.LastUser() == slowCall {
		time.Sleep(1500 * time.Millisecond)
		return providertest.Reply{Calls: []providertest.Call{{ID: "call_1", Name: "random-number", Arguments: "{}"}}}
	}
	if t.Last().Role == "user" && t.LastUser() == slowWord {
		chunks := []string{"first chunk "}
		for range 80 {
			chunks = append(chunks, "more ")
		}
		return providertest.Reply{Chunks: chunks, Delay: 50 * time.Millisecond}
	}
	return providertest.Echo(t)
}

// fakeOpenAI starts the fake and returns its URL and request recorder.
func fakeOpenAI(t *testing.T) (string, *providertest.Recorder) {
	t.Helper()
	s := openaitest.New(ptyBrain)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv.URL, s.Recorder
}

// ptyCartridge writes a cartridge using the fake, with a confirmable Lua tool.
func ptyCartridge(t *testing.T, dir, url, extra string) string {
	t.Helper()
	src := fmt.Sprintf(`meta:
  author: Tests
  name: PTY
provider:
  id: openai
  credentials:
    address: %s
    access-token: test-key
  settings:
    model: gpt-4o-mini
tools:
  - name: random-number
    lua: return 21
%s`, url, extra)
	path := filepath.Join(dir, "bot.yml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// console is nb running on a pty.
type console struct {
	t    *testing.T
	cmd  *exec.Cmd
	tty  *os.File // the master side
	mu   sync.Mutex
	out  bytes.Buffer
	mark int // expect searches after this offset
	done chan struct{}
	err  error
}

// ptyOptions change how startNBWith runs nb.
type ptyOptions struct {
	// stdin, when set, is nb's standard input (a pipe or file) and the pty
	// only its controlling terminal.
	stdin io.Reader
	// stdout, when set, is nb's standard output instead of the pty.
	stdout *os.File
	// env is added to nb's environment (TERM=dumb...).
	env []string
	// silent: the terminal never answers cursor position queries (Emacs
	// shell buffers, expect scripts, some web terminals).
	silent bool
}

// startNB runs nb with args in dir under a new pty. When stdin is not nil
// it is nb's standard input (a pipe or file) and the pty is only its
// controlling terminal, stdout and stderr.
func startNB(t *testing.T, dir string, stdin io.Reader, args ...string) *console {
	t.Helper()
	return startNBWith(t, dir, ptyOptions{stdin: stdin}, args...)
}

// startNBWith runs nb with args in dir under a new pty, as opts say.
func startNBWith(t *testing.T, dir string, opts ptyOptions, args ...string) *console {
	t.Helper()
	stdin := opts.stdin
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := &exec.Cmd{Path: exe, Args: append([]string{"nb"}, args...), Dir: dir}
	home := filepath.Join(dir, "home")
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_DATA_HOME="+filepath.Join(home, ".local/share"),
		"XDG_STATE_HOME="+filepath.Join(home, ".local/state"), "XDG_CACHE_HOME="+filepath.Join(home, ".cache"),
		"TERM=xterm", "NO_COLOR=1", "NANO_BOTS_STATE_PATH="+filepath.Join(dir, "state"))
	cmd.Env = append(cmd.Env, opts.env...)
	master, slave, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	if err := pty.Setsize(master, &pty.Winsize{Rows: 40, Cols: 200}); err != nil {
		t.Fatal(err)
	}
	if stdin != nil {
		cmd.Stdin = stdin
	} else {
		cmd.Stdin = slave
	}
	cmd.Stdout, cmd.Stderr = slave, slave
	if opts.stdout != nil {
		cmd.Stdout = opts.stdout
	}
	// A new session whose controlling terminal is the pty (fd 2 in the child).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 2}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	c := &console{t: t, cmd: cmd, tty: master, done: make(chan struct{})}
	go func() {
		buf := make([]byte, 4096)
		answered := 0
		for {
			n, err := master.Read(buf)
			c.mu.Lock()
			c.out.Write(buf[:n])
			// Answer the line editor's cursor position queries, as a
			// terminal does.
			queries := strings.Count(c.out.String(), cursorQuery)
			c.mu.Unlock()
			for ; answered < queries && !opts.silent; answered++ {
				io.WriteString(master, "\x1b[1;1R") //nolint:errcheck // nb may have ended
			}
			if err != nil {
				return
			}
		}
	}()
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		select {
		case <-c.done:
		default:
			cmd.Process.Kill() //nolint:errcheck // it may have just ended
			<-c.done
		}
		master.Close()
		if t.Failed() {
			t.Logf("terminal output:\n%s", c.output())
		}
	})
	return c
}

func (c *console) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()
}

// expect waits until s appears after the last match and moves past it.
func (c *console) expect(s string) {
	c.t.Helper()
	deadline := time.Now().Add(ptyTimeout)
	for {
		c.mu.Lock()
		out := c.out.String()
		mark := c.mark
		if i := strings.Index(out[mark:], s); i >= 0 {
			c.mark = mark + i + len(s)
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out waiting for %q; after the last match the terminal shows:\n%q", s, out[mark:])
		}
		select {
		case <-c.done:
			// Let the reader drain what is left, then look once more.
			time.Sleep(100 * time.Millisecond)
			c.mu.Lock()
			out = c.out.String()
			c.mu.Unlock()
			if !strings.Contains(out[mark:], s) {
				c.t.Fatalf("nb ended (%v) without printing %q; after the last match the terminal shows:\n%q", c.err, s, out[mark:])
			}
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// since returns what was printed after the last match.
func (c *console) since() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.out.String()[c.mark:]
}

func (c *console) send(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c.tty, s); err != nil {
		c.t.Fatalf("write to the terminal: %v", err)
	}
}

// exitCode waits for nb to end and returns its exit code.
func (c *console) exitCode() int {
	c.t.Helper()
	select {
	case <-c.done:
	case <-time.After(ptyTimeout):
		c.t.Fatalf("nb did not end; the terminal shows:\n%q", c.output())
	}
	var ee *exec.ExitError
	if errors.As(c.err, &ee) {
		return ee.ExitCode()
	}
	if c.err != nil {
		c.t.Fatalf("wait: %v", c.err)
	}
	return 0
}

// cursorQuery is the ANSI device status report asking for the cursor position.
const cursorQuery = "\x1b[6n"

const denial = "We asked the user you're chatting with for permission, but the user did not allow you to run this tool or function."

// Eval asks on the terminal before a confirmable tool runs: y runs it, n
// and an empty answer (the default, n) deny it. With the message piped on
// stdin the answer still comes from the terminal.
func TestPTYEvalConfirmation(t *testing.T) {
	const message = `call random-number {"from":15,"to":25}`
	cases := []struct {
		answer string
		want   string
	}{
		{"y", "tool random-number said: 21"},
		{"YES", "tool random-number said: 21"},
		{"n", "tool random-number said: " + denial},
		{"", "tool random-number said: " + denial},
	}
	for _, piped := range []bool{false, true} {
		for _, tc := range cases {
			name := fmt.Sprintf("answer %q", tc.answer)
			if piped {
				name += " stdin piped"
			}
			t.Run(name, func(t *testing.T) {
				dir := t.TempDir()
				url, rec := fakeOpenAI(t)
				ptyCartridge(t, dir, url, "")
				var c *console
				if piped {
					c = startNB(t, dir, strings.NewReader(message+"\n"), "bot.yml", "-", "eval")
				} else {
					c = startNB(t, dir, nil, "bot.yml", "-", "eval", message)
				}
				c.expect(`random-number {"from":15,"to":25} [yN] `)
				c.send(tc.answer + "\r")
				c.expect(tc.want)
				if code := c.exitCode(); code != 0 {
					t.Errorf("exit code %d, want 0", code)
				}
				bodies := rec.Bodies()
				if len(bodies) != 2 {
					t.Fatalf("%d requests, want 2", len(bodies))
				}
				if want := strings.TrimPrefix(tc.want, "tool random-number said: "); !bytes.Contains(bodies[1], []byte(`"content":"`+want+`"`)) {
					t.Errorf("the second request does not carry %q: %s", want, bodies[1])
				}
			})
		}
	}
}

// The transcript of §2.9: the confirming line, the answer typed, a blank
// line, the responding feedback, the answer.
func TestPTYEvalConfirmationTranscript(t *testing.T) {
	dir := t.TempDir()
	url, _ := fakeOpenAI(t)
	ptyCartridge(t, dir, url, "")
	c := startNB(t, dir, nil, "bot.yml", "-", "eval", `call random-number {"from":15,"to":25}`)
	c.expect("[yN] ")
	c.send("y\r")
	c.expect("tool random-number said: 21")
	c.exitCode()
	want := "random-number {\"from\":15,\"to\":25} [yN] y\r\n\r\nrandom-number {\"from\":15,\"to\":25}\r\n21\r\n\r\ntool random-number said: 21\r\n"
	if got := c.output(); got != want {
		t.Errorf("terminal shows\n%q\nwant\n%q", got, want)
	}
}

// Ctrl-C during a streamed eval answer stops nb with exit code 130.
func TestPTYEvalInterrupt(t *testing.T) {
	dir := t.TempDir()
	url, _ := fakeOpenAI(t)
	ptyCartridge(t, dir, url, "")
	c := startNB(t, dir, nil, "bot.yml", "-", "eval", slowWord)
	c.expect("first chunk")
	c.send("\x03")
	if code := c.exitCode(); code != 130 {
		t.Errorf("exit code %d, want 130", code)
	}
}

// Ctrl-C while eval asks about a tool stops nb with 130; the tool never runs.
func TestPTYEvalInterruptAtConfirmation(t *testing.T) {
	dir := t.TempDir()
	url, rec := fakeOpenAI(t)
	ptyCartridge(t, dir, url, "")
	c := startNB(t, dir, nil, "bot.yml", "-", "eval", `call random-number {"from":15,"to":25}`)
	c.expect("[yN] ")
	c.send("\x03")
	if code := c.exitCode(); code != 130 {
		t.Errorf("exit code %d, want 130", code)
	}
	// The line the terminal echoed ^C on is ended: the shell's prompt
	// does not land after it.
	time.Sleep(100 * time.Millisecond)
	if after := c.since(); !strings.HasSuffix(after, "\n") {
		t.Errorf("after Ctrl-C the terminal shows %q: the line is not ended", after)
	}
	if n := len(rec.Bodies()); n != 1 {
		t.Errorf("%d requests, want 1 (nothing sent after Ctrl-C)", n)
	}
}

// The REPL: the prompt, a line answered, Ctrl-C during a slow answer
// returns to the prompt and the REPL goes on, a tool confirmed through
// the line editor (Ctrl-C there denies it), exit leaves with 0.
func TestPTYREPL(t *testing.T) {
	dir := t.TempDir()
	url, rec := fakeOpenAI(t)
	ptyCartridge(t, dir, url, "")
	c := startNB(t, dir, nil, "bot.yml", "-", "repl")
	c.expect("🤖> ")
	c.send("hello\r")
	c.expect("echo: hello")
	c.expect("🤖> ")

	c.send(slowWord + "\r")
	c.expect("first chunk")
	c.send("\x03")
	c.expect("(answer stopped)")
	c.expect("🤖> ")
	c.send("still here\r")
	c.expect("echo: still here")
	c.expect("🤖> ")
	if got := c.since(); strings.Contains(got, "more") {
		t.Errorf("the stopped answer went on after Ctrl-C: %q", got)
	}

	c.send(`call random-number {"from":15,"to":25}` + "\r")
	c.expect(`random-number {"from":15,"to":25} [yN] `)
	c.send("y\r")
	c.expect("tool random-number said: 21")
	c.expect("🤖> ")

	// Ctrl-C at the question stops the answer, as Ctrl-C anywhere else:
	// no tool runs and no new request is sent; the REPL goes on.
	c.send(`call random-number {"from":1,"to":2}` + "\r")
	c.expect(`random-number {"from":1,"to":2} [yN] `)
	c.send("\x03")
	c.expect("(answer stopped)")
	c.expect("🤖> ")

	c.send("exit\r")
	if code := c.exitCode(); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	// hello, slow, still here, a call and its result, a call stopped at
	// its question: 6 requests.
	if n := len(rec.Bodies()); n != 6 {
		t.Errorf("%d requests, want 6", n)
	}
	// The stopped answer is not sent back as complete.
	if last := rec.Bodies()[4]; bytes.Contains(last, []byte("first chunk")) {
		t.Errorf("the partial answer was sent back: %s", last)
	}
}

// Ctrl-D at the prompt leaves the REPL with exit code 0; Ctrl-C at the
// prompt does not leave.
func TestPTYREPLCtrlD(t *testing.T) {
	dir := t.TempDir()
	url, _ := fakeOpenAI(t)
	ptyCartridge(t, dir, url, "")
	c := startNB(t, dir, nil, "bot.yml", "-", "repl")
	c.expect("🤖> ")
	c.send("half a line\x03")
	c.expect("🤖> ")
	c.send("\x04")
	if code := c.exitCode(); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}

// The REPL's line history holds what the user typed: it is readable by
// its owner only, like the state.
func TestPTYREPLHistoryIsPrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	dir := t.TempDir()
	url, _ := fakeOpenAI(t)
	ptyCartridge(t, dir, url, "")
	history := filepath.Join(dir, "state", "go-nano-bots", "repl-history", "tests_pty.history")
	// A folder left open by an earlier run is closed again.
	if err := os.MkdirAll(filepath.Dir(history), 0o755); err != nil {
		t.Fatal(err)
	}
	c := startNB(t, dir, nil, "bot.yml", "-", "repl")
	c.expect("🤖> ")
	c.send("my private words\r")
	c.expect("echo: my private words")
	c.expect("🤖> ")
	c.send("exit\r")
	if code := c.exitCode(); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	data, err := os.ReadFile(history)
	if err != nil || !strings.Contains(string(data), "my private words") {
		t.Fatalf("history %s: %q, %v", history, data, err)
	}
	for _, p := range []string{history, filepath.Dir(history)} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("%s has mode %v: others can read it", p, perm)
		}
	}
}

// A cartridge that cannot run is reported at once, before eval waits for
// a message typed on the terminal that it could not send.
func TestPTYEvalReportsBeforeReadingTheMessage(t *testing.T) {
	dir := t.TempDir()
	src := "provider:\n  id: openai\n  credentials:\n    access-token: ENV/NB_TEST_UNSET_KEY\n  settings:\n    model: gpt-4o-mini\n"
	if err := os.WriteFile(filepath.Join(dir, "bot.yml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	c := startNB(t, dir, nil, "bot.yml", "-", "eval")
	c.expect("NB_TEST_UNSET_KEY is not set")
	if code := c.exitCode(); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if strings.Contains(c.output(), "reading the message") {
		t.Errorf("eval asked for a message it could not send:\n%s", c.output())
	}
}

// The REPL comes up everywhere: with stdout redirected to a file, under
// TERM=dumb, and on a terminal that never answers the cursor position
// query (before, it hung forever before its first prompt, and with
// stdout redirected the query went into the file). Lines are then read
// plainly; a file gets no escape codes.
func TestPTYREPLWithoutLineEditing(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts func(t *testing.T, dir string) ptyOptions
	}{
		{"stdout redirected", func(t *testing.T, dir string) ptyOptions {
			f, err := os.Create(filepath.Join(dir, "out.txt"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return ptyOptions{stdout: f}
		}},
		{"TERM=dumb", func(*testing.T, string) ptyOptions { return ptyOptions{env: []string{"TERM=dumb"}} }},
		{"no answer to the cursor query", func(*testing.T, string) ptyOptions { return ptyOptions{silent: true} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			url, _ := fakeOpenAI(t)
			ptyCartridge(t, dir, url, "")
			opts := tc.opts(t, dir)
			c := startNBWith(t, dir, opts, "bot.yml", "-", "repl")
			start := time.Now()
			c.send("hello\r")
			if opts.stdout == nil {
				c.expect("echo: hello")
			}
			c.send("exit\r")
			if code := c.exitCode(); code != 0 {
				t.Errorf("exit code %d, want 0", code)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v", d)
			}
			if opts.stdout != nil {
				out, _ := os.ReadFile(filepath.Join(dir, "out.txt"))
				if !strings.Contains(string(out), "echo: hello") || strings.Contains(string(out), "\x1b") {
					t.Errorf("the file holds %q: want the answer, no escape codes", out)
				}
			}
			if strings.Contains(c.output(), pasteMode) {
				t.Errorf("bracketed paste was turned on without the line editor")
			}
		})
	}
}

// pasteMode turns the terminal's bracketed paste on.
const pasteMode = "\x1b[?2004h"

// A multi-line paste is one message, not one request per line; a line
// ending in a backslash goes on on the next one.
func TestPTYREPLPasteAndContinuation(t *testing.T) {
	dir := t.TempDir()
	url, rec := fakeOpenAI(t)
	ptyCartridge(t, dir, url, "")
	c := startNB(t, dir, nil, "bot.yml", "-", "repl")
	c.expect(pasteMode)
	c.expect("🤖> ")
	c.send("\x1b[200~first line\r\nsecond line\nthird\x1b[201~\r")
	c.expect("echo: first line\r\nsecond line\r\nthird")
	c.expect("🤖> ")
	c.send("one \\\r")
	c.expect("... ")
	c.send("two\r")
	c.expect("echo: one \r\ntwo")
	c.expect("🤖> ")
	c.send("exit\r")
	if code := c.exitCode(); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	if n := len(rec.Bodies()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

// When nothing arrives for two seconds, a terminal's stderr says what nb
// waits for; the status is erased when the answer starts.
func TestPTYWaitingStatus(t *testing.T) {
	dir := t.TempDir()
	url, _ := fakeOpenAI(t)
	ptyCartridge(t, dir, url, "")
	c := startNB(t, dir, nil, "bot.yml", "-", "eval", "wait 3s")
	c.expect("waiting for openai gpt-4o-mini… 2s")
	c.expect("\x1b[J") // erased, with the lines under it
	c.expect("echo: wait 3s")
	if code := c.exitCode(); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
}

// On a plain terminal, a line typed while an answer runs is queued and
// given to the model after the current tool round, shown as queued, then
// as sent; the model's next request has it after the tool's result.
func TestPTYREPLQueuedLine(t *testing.T) {
	dir := t.TempDir()
	url, rec := fakeOpenAI(t)
	ptyCartridge(t, dir, url, "safety: {tools: {confirmable: false}}\n")
	c := startNBWith(t, dir, ptyOptions{env: []string{"TERM=dumb"}}, "bot.yml", "-", "repl")
	c.expect("🤖> ")
	c.send(slowCall + "\r")
	time.Sleep(300 * time.Millisecond)
	c.send("in metric units\r")
	c.expect("nb: queued: in metric units")
	c.expect("nb: sent: in metric units")
	c.expect("echo: in metric units")
	c.send("exit\r")
	if code := c.exitCode(); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	bodies := rec.Bodies()
	if len(bodies) != 2 {
		t.Fatalf("%d requests, want 2", len(bodies))
	}
	if !bytes.Contains(bodies[1], []byte(`"role":"tool"}`)) && !bytes.Contains(bodies[1], []byte(`"tool_call_id":"call_1"`)) {
		t.Errorf("the second request lacks the tool's result: %s", bodies[1])
	}
	if !bytes.Contains(bodies[1], []byte(`{"content":"in metric units","role":"user"}`)) {
		t.Errorf("the second request lacks the queued line: %s", bodies[1])
	}
}

// With the line editor too: a line typed while the answer runs (the
// editor idle, the terminal in its normal mode) is queued and given to
// the model after the tool round; the editor reads at the next prompt as
// before.
func TestPTYREPLQueuedLineEditor(t *testing.T) {
	dir := t.TempDir()
	url, rec := fakeOpenAI(t)
	ptyCartridge(t, dir, url, "safety: {tools: {confirmable: false}}\n")
	c := startNB(t, dir, nil, "bot.yml", "-", "repl")
	c.expect("🤖> ")
	c.send(slowCall + "\r")
	time.Sleep(500 * time.Millisecond)
	c.send("in metric units\r")
	c.expect("nb: queued: in metric units")
	c.expect("nb: sent: in metric units")
	c.expect("echo: in metric units")
	c.expect("🤖> ")
	// A line typed during an answer without tool calls is the next
	// message, sent when the answer ends.
	c.send(slowWord + "\r")
	c.expect("first chunk")
	c.send("hello\r")
	c.expect("nb: queued: hello")
	c.expect("nb: sent: hello")
	c.expect("echo: hello")
	c.expect("🤖> ")
	c.send("exit\r")
	if code := c.exitCode(); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	bodies := rec.Bodies()
	if len(bodies) != 4 {
		t.Fatalf("%d requests, want 4", len(bodies))
	}
	if !bytes.Contains(bodies[1], []byte(`{"content":"in metric units","role":"user"}`)) {
		t.Errorf("the second request lacks the queued line: %s", bodies[1])
	}
}

// The confirmation of an exec call says where the command runs: here,
// where bubblewrap cannot run, NOT sandboxed.
func TestPTYExecConfirmationSaysWhere(t *testing.T) {
	dir := t.TempDir()
	url, _ := fakeOpenAI(t)
	ptyCartridge(t, dir, url, "builtins:\n  exec: {}\n")
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "bwrap"), []byte("#!/bin/sh\necho 'bwrap: Creating new namespace failed: Operation not permitted' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := startNBWith(t, dir, ptyOptions{env: []string{"PATH=" + bin + ":" + os.Getenv("PATH")}}, "bot.yml", "-", "eval", `call exec {"command":"echo hi"}`)
	c.expect(`exec {"command":"echo hi"} [NOT sandboxed (bubblewrap cannot run here): with your rights] [yN] `)
	c.send("n\r")
	c.expect("tool exec said: " + denial)
	c.exitCode()
}

// SIGTERM ends the REPL with 143, at the prompt (the line editor, plain
// lines, piped input) and during an answer, and leaves the terminal as
// it found it (bracketed paste off): nb's one signal handler cancels the
// run, where the REPL read the line without a way to stop.
func TestPTYREPLSIGTERM(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   ptyOptions
		answer bool
	}{
		{"editor at the prompt", ptyOptions{}, false},
		{"editor during an answer", ptyOptions{}, true},
		{"plain at the prompt", ptyOptions{env: []string{"TERM=dumb"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			url, _ := fakeOpenAI(t)
			ptyCartridge(t, dir, url, "")
			c := startNBWith(t, dir, tc.opts, "bot.yml", "-", "repl")
			c.expect("> ")
			if tc.answer {
				c.send(slowWord + "\r")
				c.expect("first chunk")
			}
			c.cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // checked by the exit code
			if code := c.exitCode(); code != 143 {
				t.Errorf("exit code %d, want 143", code)
			}
			if strings.Contains(c.output(), pasteMode) {
				c.expect("\x1b[?2004l") // bracketed paste turned off
			}
		})
	}
	t.Run("piped", func(t *testing.T) {
		dir := t.TempDir()
		url, _ := fakeOpenAI(t)
		ptyCartridge(t, dir, url, "")
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		c := startNB(t, dir, r, "bot.yml", "-", "repl")
		r.Close()
		io.WriteString(w, "hello\n") //nolint:errcheck // checked by the answer
		c.expect("echo: hello")
		c.cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // checked by the exit code
		if code := c.exitCode(); code != 143 {
			t.Errorf("exit code %d, want 143", code)
		}
	})
}

// In the REPL, a command's output shows under the running line while it
// runs: the command prints a line, then waits for a file the test writes
// only when that line is on the terminal (without live output it would
// wait its three seconds and say "never"); the lines are erased when the
// result comes, and the model gets the whole output.
func TestPTYREPLLiveToolOutput(t *testing.T) {
	dir := t.TempDir()
	url, rec := fakeOpenAI(t)
	ptyCartridge(t, dir, url, "builtins:\n  exec: {workspace: "+dir+", sandbox: off}\nsafety: {tools: {confirmable: false}}\n")
	c := startNB(t, dir, nil, "bot.yml", "-", "repl")
	c.expect("🤖> ")
	// \151 is i: the command as shown in the feedback does not say compiling.
	// No semicolons: the fake splits calls at them.
	c.send(`call exec {"command":"printf 'comp\\151ling step 1\\n'\nfor i in $(seq 300)\ndo [ -e go-on ] && break\nsleep 0.01\ndone\n[ -e go-on ] || echo never"}` + "\r")
	c.expect("running exec")
	c.expect("  compiling step 1")
	if err := os.WriteFile(filepath.Join(dir, "go-on"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c.expect("\x1b[J")
	c.expect("tool exec said: compiling step 1")
	c.expect("🤖> ")
	c.send("exit\r")
	c.exitCode()
	if last := rec.Bodies()[len(rec.Bodies())-1]; !bytes.Contains(last, []byte(`{"content":"compiling step 1\nExit code: 0","role":"tool"`)) {
		t.Errorf("the model got: %s", last)
	}
}
