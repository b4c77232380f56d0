// Package providertest holds what the in-process fake providers share: a
// Brain that decides each answer, the Reply it gives, and a recorder of the
// raw requests. Each provider package has a sibling <name>test package with
// a fake server that decodes its own wire format into a Turn and encodes the
// Reply back in that provider's documented format, split into small writes.
package providertest

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/media"
)

// Turn is a request as a fake decoded it from the wire.
type Turn struct {
	// System is the system text, if the wire format has one.
	System string
	// Messages are the conversation entries in wire order (system entries
	// included where the format puts them among the messages).
	Messages []Msg
	// Tools are the names of the offered tools.
	Tools []string
	// Stream is the request's stream flag.
	Stream bool
	// Model is the requested model.
	Model string
}

// Msg is one decoded conversation entry.
type Msg struct {
	Role    string // system, user, assistant, tool
	Content string
	// ToolCallID and ToolName identify a tool result.
	ToolCallID, ToolName string
	// ToolCalls are the assistant's calls, as "name(args)" strings.
	ToolCalls []string
	// Images are the message's images as the fake decoded them from the
	// wire: bytes (from base64) with their media type, or a URL.
	Images []media.Image
}

// DescribeImages is how Echo mentions images: " [image image/png 4
// bytes]" for each image with data, " [image <url>]" for each URL.
func DescribeImages(images []media.Image) string {
	var b strings.Builder
	for _, img := range images {
		if len(img.Data) > 0 {
			fmt.Fprintf(&b, " [image %s %d bytes]", img.MediaType, len(img.Data))
		} else {
			fmt.Fprintf(&b, " [image %s]", img.URL)
		}
	}
	return b.String()
}

// LastUser returns the content of the last user message.
func (t Turn) LastUser() string {
	for i := len(t.Messages) - 1; i >= 0; i-- {
		if t.Messages[i].Role == "user" {
			return t.Messages[i].Content
		}
	}
	return ""
}

// Last returns the last message, or a zero Msg.
func (t Turn) Last() Msg {
	if len(t.Messages) == 0 {
		return Msg{}
	}
	return t.Messages[len(t.Messages)-1]
}

// Call is a tool call a fake answers with.
type Call struct {
	ID        string `json:"id,omitempty"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // JSON text
}

// Reply is what the fake model answers.
type Reply struct {
	// Chunks are the text pieces streamed in order (one piece when not streaming).
	Chunks []string `json:"chunks,omitempty"`
	// Reasoning is streamed as the provider's reasoning output first.
	Reasoning string `json:"reasoning,omitempty"`
	// Calls are tool calls; their arguments are streamed in fragments.
	Calls []Call `json:"calls,omitempty"`
	// Status, when not 0 or 200, answers with that HTTP status and ErrorBody.
	Status    int    `json:"status,omitempty"`
	ErrorBody string `json:"error_body,omitempty"`
	// RetryAfter sets a Retry-After header on an error answer.
	RetryAfter string `json:"retry_after,omitempty"`
	// CutAfter closes the connection after that many text chunks (0: never).
	CutAfter int `json:"cut_after,omitempty"`
	// StreamError sends the provider's mid-stream error event after the chunks.
	StreamError string `json:"stream_error,omitempty"`
	// Delay waits before each chunk.
	Delay time.Duration `json:"delay,omitempty"`
	// Finish, when set, is the finish reason the fake sends in its
	// provider's own vocabulary (length, max_tokens, MAX_TOKENS ...)
	// instead of its normal end.
	Finish string `json:"finish,omitempty"`
}

// Text is the whole text of the reply.
func (r Reply) Text() string { return strings.Join(r.Chunks, "") }

// Brain decides the reply to a turn.
type Brain func(Turn) Reply

// Echo answers "echo: <last user message>" in chunks of at most 3 bytes.
// After a tool result it answers "tool <name> said: <content>". When the
// last user message starts with "call " and tools are offered, it calls
// the first tool with the arguments after "call <name> " (JSON). Images
// are mentioned after the text they came with (DescribeImages); a user
// message right after tool results (where OpenAI-style APIs carry the
// images of tool results) adds its images to the tool round's answer.
func Echo(t Turn) Reply {
	msgs := t.Messages
	roundImages := ""
	if n := len(msgs); n >= 2 && msgs[n-1].Role == "user" && msgs[n-2].Role == "tool" && len(msgs[n-1].Images) > 0 {
		roundImages = DescribeImages(msgs[n-1].Images)
		msgs = msgs[:n-1]
	}
	if n := len(msgs); n > 0 && msgs[n-1].Role == "tool" {
		var parts []string
		for i := n - 1; i >= 0 && msgs[i].Role == "tool"; i-- {
			parts = append([]string{fmt.Sprintf("tool %s said: %s%s", msgs[i].ToolName, msgs[i].Content, DescribeImages(msgs[i].Images))}, parts...)
		}
		return Reply{Chunks: Split(strings.Join(parts, "; ")+roundImages, 3)}
	}
	u := t.LastUser()
	if strings.HasPrefix(u, "call ") && len(t.Tools) > 0 {
		var calls []Call
		for i, spec := range strings.Split(strings.TrimPrefix(u, "call "), ";") {
			name, args, _ := strings.Cut(strings.TrimSpace(spec), " ")
			if args == "" {
				args = "{}"
			}
			calls = append(calls, Call{ID: fmt.Sprintf("call_%d", i+1), Name: name, Arguments: args})
		}
		return Reply{Calls: calls}
	}
	for i := len(t.Messages) - 1; i >= 0; i-- {
		if t.Messages[i].Role == "user" {
			u += DescribeImages(t.Messages[i].Images)
			break
		}
	}
	return Reply{Chunks: Split("echo: "+u, 3)}
}

// Split cuts s into pieces of at most n bytes, never inside a UTF-8 sequence.
func Split(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		i := min(n, len(s))
		for i < len(s) && i > 0 && s[i]&0xC0 == 0x80 {
			i++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}

// Scripted returns a brain that gives the replies in order, then falls
// back to Echo.
func Scripted(replies ...Reply) Brain {
	var mu sync.Mutex
	return func(t Turn) Reply {
		mu.Lock()
		defer mu.Unlock()
		if len(replies) == 0 {
			return Echo(t)
		}
		r := replies[0]
		replies = replies[1:]
		return r
	}
}

// FromFile returns the brain a command-line test asks for: when the file
// at path exists, its JSON array of replies is played in order (one reply
// consumed per request, tracked in <path>.pos so that separate processes
// share the script); otherwise, or once the replies are used up, Echo.
func FromFile(path string) Brain {
	return func(t Turn) Reply {
		if path == "" {
			return Echo(t)
		}
		mu.Lock()
		defer mu.Unlock()
		data, err := os.ReadFile(path)
		if err != nil {
			return Echo(t)
		}
		var replies []Reply
		if err := json.Unmarshal(data, &replies); err != nil {
			return Reply{Status: 500, ErrorBody: "bad NB_FAKE_SCRIPT: " + err.Error()}
		}
		// The position is kept with a digest of the script, so a script
		// replaced by another starts from its first reply.
		sum := fmt.Sprintf("%x", sha256.Sum256(data))
		pos := 0
		if b, err := os.ReadFile(path + ".pos"); err == nil {
			var digest string
			if _, err := fmt.Sscan(string(b), &digest, &pos); err != nil || digest != sum {
				pos = 0
			}
		}
		if pos >= len(replies) {
			return Echo(t)
		}
		os.WriteFile(path+".pos", []byte(fmt.Sprintf("%s %d", sum, pos+1)), 0o644) //nolint:errcheck // test helper
		return replies[pos]
	}
}

var mu sync.Mutex

// Recorder keeps the raw bodies a fake received, and optionally appends
// each one as a line to a file (for command-line tests).
type Recorder struct {
	mu     sync.Mutex
	bodies [][]byte
	File   string
}

// Record stores one request body.
func (r *Recorder) Record(body []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bodies = append(r.bodies, body)
	if r.File != "" {
		if f, err := os.OpenFile(r.File, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
			f.Write(append(compact(body), '\n')) //nolint:errcheck // test helper
			f.Close()
		}
	}
}

// Bodies returns the recorded bodies.
func (r *Recorder) Bodies() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.bodies...)
}

// Last decodes the last recorded body.
func (r *Recorder) Last() map[string]any {
	b := r.Bodies()
	if len(b) == 0 {
		return nil
	}
	var m map[string]any
	json.Unmarshal(b[len(b)-1], &m) //nolint:errcheck // test helper
	return m
}

func compact(b []byte) []byte {
	var m any
	if json.Unmarshal(b, &m) != nil {
		return b
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(m) != nil {
		return b
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// Flush writes s and flushes it to the client, so each piece is a separate read.
func Flush(w http.ResponseWriter, s string) {
	w.Write([]byte(s)) //nolint:errcheck // client may have gone
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// WriteSplit writes s in pieces of n bytes, flushing each, so frames arrive
// split across reads at arbitrary places.
func WriteSplit(w http.ResponseWriter, s string, n int) {
	for len(s) > 0 {
		i := min(n, len(s))
		Flush(w, s[:i])
		s = s[i:]
	}
}

// Hijack closes the connection abruptly (a dropped stream).
func Hijack(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
		}
	}
}
