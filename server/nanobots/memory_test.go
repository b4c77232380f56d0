package nanobots

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbots/nb/provider/providertest"
)

// The figures of TestHugeStreamMemory: a client cartridge's provider
// streams hugeStream bytes of answer; the server must stay under
// memoryCeiling (its Go memory at its peak, race detector or not).
const (
	hugeStream    = 200 << 20
	memoryCeiling = 640 << 20
)

// A client cartridge whose provider streams 200 MiB: the server reads
// 64 MiB of it, says the answer was cut, and its memory stays under the
// ceiling while a client polls the stream to its end (issue 19 §2).
// The server runs in a child process, whose peak memory it reports.
func TestHugeStreamMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 200 MiB")
	}
	prov := httptest.NewServer(http.HandlerFunc(endlessAnswer))
	defer prov.Close()

	child := exec.Command(os.Args[0], "-test.run=^TestMemoryChild$", "-test.v")
	child.Env = append(os.Environ(), "NB_TEST_MEMORY_CHILD=1")
	child.Stderr = os.Stderr
	stdin, _ := child.StdinPipe()
	stdout, _ := child.StdoutPipe()
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill() //nolint:errcheck // ends it if the test fails first
	lines := bufio.NewScanner(stdout)
	url := ""
	for url == "" && lines.Scan() {
		if u, ok := strings.CutPrefix(lines.Text(), "SERVING "); ok {
			url = u
		}
	}
	if url == "" {
		t.Fatal("the child server did not start")
	}

	cart := fmt.Sprintf(`{"cartridge": {"meta": {"name": "Huge"}, "provider": {"id": "openai", "credentials": {"address": %q, "access-token": "sk-client"}, "settings": {"model": "m"}}}, "input": "talk forever"}`, prov.URL)
	resp, err := http.Post(url+"/cartridges/stream", "application/json", strings.NewReader(cart))
	if err != nil {
		t.Fatal(err)
	}
	var created struct{ ID string }
	json.NewDecoder(resp.Body).Decode(&created) //nolint:errcheck // checked below
	resp.Body.Close()
	if created.ID == "" {
		t.Fatalf("no stream: %d", resp.StatusCode)
	}
	var final struct{ State, Output string }
	deadline := time.Now().Add(3 * time.Minute)
	for final.State == "" || final.State == "pending" {
		if time.Now().After(deadline) {
			t.Fatal("the stream never ended")
		}
		if final.State != "" {
			time.Sleep(100 * time.Millisecond) // a poll copies up to 64 MiB: not in a tight loop
		}
		resp, err := http.Get(url + "/cartridges/stream/" + created.ID)
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&final)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	stdin.Write([]byte("peak\n")) //nolint:errcheck // the answer says
	peak := int64(0)
	for peak == 0 && lines.Scan() {
		if v, ok := strings.CutPrefix(lines.Text(), "PEAK "); ok {
			peak, _ = strconv.ParseInt(v, 10, 64)
		}
	}
	stdin.Close()
	child.Wait() //nolint:errcheck // done with it

	t.Logf("state %s, output %d bytes, the server's peak memory %d MiB", final.State, len(final.Output), peak>>20)
	if final.State != "finished" || len(final.Output) > 64<<20+200 || !strings.Contains(final.Output[max(len(final.Output)-100, 0):], "it reached the limit of 64 MiB per answer]") {
		t.Errorf("state %s, %d bytes of output ending %q: want the answer cut at 64 MiB, saying so", final.State, len(final.Output), final.Output[max(len(final.Output)-80, 0):])
	}
	if peak == 0 || peak > memoryCeiling {
		t.Errorf("the server's memory peaked at %d MiB, over the ceiling of %d MiB", peak>>20, memoryCeiling>>20)
	}
}

// endlessAnswer streams hugeStream bytes of answer as chat.completion
// chunks, as the OpenAI API does.
func endlessAnswer(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body) //nolint:errcheck // the request does not matter
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := []byte(`data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"` + strings.Repeat("0123456789abcdef", 512) + `"}}]}` + "\n\n")
	for sent := 0; sent < hugeStream; sent += 8192 {
		if _, err := w.Write(chunk); err != nil {
			return
		}
	}
	io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n") //nolint:errcheck // the client may be gone
}

// TestMemoryChild is the server of TestHugeStreamMemory, in its own
// process: it serves until its stdin closes and, asked, says the peak
// of its Go memory (mapped by the runtime and not given back), sampled
// every 2 ms.
func TestMemoryChild(t *testing.T) {
	if os.Getenv("NB_TEST_MEMORY_CHILD") != "1" {
		t.Skip("the child process of TestHugeStreamMemory")
	}
	var peak atomic.Int64
	stop := make(chan struct{})
	go func() {
		samples := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
		for {
			metrics.Read(samples)
			if v := int64(samples[0].Value.Uint64() - samples[1].Value.Uint64()); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	defer close(stop)
	// The client may take long to read a poll of 64 MiB on a loaded
	// machine: the stream must not be taken as abandoned meanwhile.
	f := newFixture(t, setup{files: cartridges, api: Options{AbandonAfter: -1}})
	fmt.Println("SERVING " + f.url)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() == "peak" {
			fmt.Println("PEAK " + strconv.FormatInt(peak.Load(), 10))
		}
	}
}

// An answer longer than the limit is cut there, kept, and says so, in a
// stream and in a whole evaluation.
func TestAnswerCut(t *testing.T) {
	f := newFixture(t, setup{files: cartridges, api: Options{MaxOutput: 4096}, brain: func(providertest.Turn) providertest.Reply {
		return providertest.Reply{Chunks: []string{strings.Repeat("x", 1000), strings.Repeat("y", 1000), strings.Repeat("z", 1000), strings.Repeat("w", 1000), strings.Repeat("v", 1000)}}
	}})
	const notice = "\n\n[nb: the answer was cut here: it reached the limit of 4 KiB per answer]"
	_, body := f.do("POST", "/cartridges/stream", `{"cartridge": "writer", "input": "hi"}`)
	final, _ := f.pollUntilDone(decodeJSON(t, body)["id"].(string))
	_, body = f.do("POST", "/cartridges", `{"cartridge": "writer", "input": "hi"}`)
	whole := decodeJSON(t, body)
	for what, m := range map[string]map[string]any{"stream": final, "evaluation": whole} {
		out, _ := m["output"].(string)
		if m["state"] != "finished" || !strings.HasSuffix(out, notice+"\n") || len(out) > 4096 || !strings.HasPrefix(out, strings.Repeat("x", 1000)) {
			t.Errorf("%s: state %v, %d bytes: %q", what, m["state"], len(out), out[max(len(out)-120, 0):])
		}
	}
}
