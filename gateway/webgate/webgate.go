// Package webgate carries a pipeline's human gates to the gateway's web
// chat. The web chat lives in nb gateway's listener, which a pipeline
// run (another process) cannot open; the two meet in a folder of the
// gateway's state folder instead (gatewayrun.Files.WebGates), which
// only the user reaches:
//
//   - ask-<chat>.json: a gate waits for an answer in the web chat chat
//     (hex-encoded in the name); it holds the question's text. The
//     pipeline writes it when it asks and removes it once answered.
//   - out-<time>-<n>.json: a message of the pipeline to a chat (an
//     acknowledgement, "Answer with A or F"), delivered by the gateway.
//   - in-<time>-<n>.json: a message the web chat's user wrote in a chat
//     with a gate waiting, written by the gateway for the pipeline, which
//     decides whether it answers.
//
// The pipeline's side is Channel, a channel.Channel the gate opens as it
// opens Telegram; the gateway's side is Board. Every file is written
// whole under a temporary name and renamed, so a reader never sees half.
package webgate

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/internal/atomicfile"
)

// Name is the channel name of the web chat in human.channel ("web:<chat>").
const Name = "web"

// Poll is how often each side looks at the folder.
const Poll = 100 * time.Millisecond

// note is a file's content.
type note struct {
	Chat    string    `json:"chat"`
	Content string    `json:"content"`
	At      time.Time `json:"at"`
	// PID is the process of the run that asks (ask files): a question
	// whose run died without withdrawing it is void.
	PID int `json:"pid,omitempty"`
}

// gone says whether process pid has ended (the state folder is this
// machine's, so the asking run is a process here).
func gone(pid int) bool {
	if pid <= 0 {
		return false
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return true
	}
	return errors.Is(p.Signal(syscall.Signal(0)), os.ErrProcessDone)
}

func askName(chat string) string { return "ask-" + hex.EncodeToString([]byte(chat)) + ".json" }

// write writes v as dir/name through a temporary file of its own and a
// rename (atomicfile: two runs asking in one chat at once never share
// a temporary file).
func write(dir, name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(dir, name), data, 0o600)
}

var seq struct {
	sync.Mutex
	n uint64
}

// uniqueName is prefix-<time>-<n>-<random>.json: names sort in the
// order they were made by one process.
func uniqueName(prefix string) string {
	seq.Lock()
	seq.n++
	n := seq.n
	seq.Unlock()
	var r [4]byte
	rand.Read(r[:]) //nolint:errcheck // never fails
	return fmt.Sprintf("%s-%020d-%08d-%s.json", prefix, time.Now().UnixNano(), n, hex.EncodeToString(r[:]))
}

// take reads and removes the files dir/prefix-*.json, oldest first,
// handing each to use; a file use refuses (false) is kept for the next
// look. A file that does not parse is removed.
func take(dir, prefix string, use func(note) bool) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, prefix+"-") && strings.HasSuffix(n, ".json") {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		p := filepath.Join(dir, n)
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		var m note
		if json.Unmarshal(data, &m) != nil || use(m) {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// Channel is the pipeline's side: a channel.Channel named "web" whose
// Send leaves a message for the gateway to deliver and whose Run reads
// what the web chat's user answered.
type Channel struct {
	Dir string
}

// Name implements channel.Channel.
func (c *Channel) Name() string { return Name }

// Capabilities implements channel.Channel.
func (c *Channel) Capabilities() channel.Capabilities {
	return channel.Capabilities{Markdown: channel.CommonMark}
}

// Send implements channel.Channel: the message waits in the folder until
// the gateway delivers it.
func (c *Channel) Send(_ context.Context, m bus.Outbound) (string, error) {
	name := uniqueName("out")
	if err := write(c.Dir, name, note{Chat: m.ChatID, Content: m.Content, At: time.Now()}); err != nil {
		return "", fmt.Errorf("web chat: %w", err)
	}
	return strings.TrimSuffix(name, ".json"), nil
}

// Post shows text in chat as a question waiting for an answer, until
// withdraw (one at a time in a chat: a question posted there replaces
// the one before, as the gate of a run killed and resumed asks again): the gateway shows it to every web chat page open on chat,
// and to those opened later, and hands the messages written there to
// Run instead of to the assistant.
func (c *Channel) Post(_ context.Context, chat, text string) (withdraw func(), err error) {
	name := askName(chat) // one question a chat: a newer one replaces one left by a run that died
	if err := write(c.Dir, name, note{Chat: chat, Content: text, At: time.Now(), PID: os.Getpid()}); err != nil {
		return nil, fmt.Errorf("web chat: %w", err)
	}
	return func() { os.Remove(filepath.Join(c.Dir, name)) }, nil //nolint:errcheck // gone already is fine
}

// Run implements channel.Channel: it publishes what the web chat's user
// wrote in a chat with a question waiting, until ctx ends.
func (c *Channel) Run(ctx context.Context, in channel.Inbox, ready func()) error {
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return fmt.Errorf("web chat: %w", err)
	}
	ready()
	t := time.NewTicker(Poll)
	defer t.Stop()
	for {
		err := take(c.Dir, "in", func(m note) bool {
			in.Publish(ctx, bus.Inbound{Channel: Name, ID: strconv.FormatInt(m.At.UnixNano(), 10), SenderID: Name, ChatID: m.Chat, Content: m.Content, Timestamp: m.At}) //nolint:errcheck // the gate's inbox never fails
			return true
		})
		if err != nil {
			return fmt.Errorf("web chat: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Board is the gateway's side: which web chats have a gate waiting, and
// the pipeline's messages to deliver.
type Board struct {
	Dir string

	mu    sync.Mutex
	shown map[string]time.Time // ask file -> its time, once shown
}

// Pending is the question waiting in chat, if any.
func (b *Board) Pending(chat string) (text string, ok bool) {
	m, ok := b.ask(chat)
	return m.Content, ok
}

// Show is the question waiting in chat, if any, for a page that opens
// chat: Run will not send it again.
func (b *Board) Show(chat string) (text string, ok bool) {
	m, ok := b.ask(chat)
	if ok {
		b.mu.Lock()
		if b.shown == nil {
			b.shown = map[string]time.Time{}
		}
		b.shown[askName(chat)] = m.At
		b.mu.Unlock()
	}
	return m.Content, ok
}

func (b *Board) ask(chat string) (note, bool) {
	return readAsk(filepath.Join(b.Dir, askName(chat)))
}

// readAsk reads an ask file; one left by a run that died is removed.
func readAsk(path string) (note, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return note{}, false
	}
	var m note
	if json.Unmarshal(data, &m) != nil {
		return note{}, false
	}
	if gone(m.PID) {
		os.Remove(path) //nolint:errcheck // void either way
		return note{}, false
	}
	return m, true
}

// Answer hands a message the web chat's user wrote in chat to the gate
// waiting there; it reports false, writing nothing, when none waits.
func (b *Board) Answer(chat, content string, at time.Time) (bool, error) {
	if _, ok := b.Pending(chat); !ok {
		return false, nil
	}
	if err := write(b.Dir, uniqueName("in"), note{Chat: chat, Content: content, At: at}); err != nil {
		return true, fmt.Errorf("pipeline gate: %w", err)
	}
	return true, nil
}

// Run delivers, until ctx ends, each new question and each message of
// the pipelines through send; a message send cannot deliver (no page is
// open on its chat) is dropped, a question is shown again when a page
// opens the chat (Pending).
func (b *Board) Run(ctx context.Context, send func(ctx context.Context, chat, content string) error) error {
	t := time.NewTicker(Poll)
	defer t.Stop()
	for {
		// The messages first: a gate's acknowledgement was written
		// before the next gate's question.
		if err := take(b.Dir, "out", func(m note) bool {
			send(ctx, m.Chat, m.Content) //nolint:errcheck // a pipeline's remark with no page to read it is dropped
			return true
		}); err != nil {
			return fmt.Errorf("pipeline gates: %w", err)
		}
		b.showQuestions(ctx, send)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// showQuestions sends the questions not shown yet.
func (b *Board) showQuestions(ctx context.Context, send func(ctx context.Context, chat, content string) error) {
	entries, _ := os.ReadDir(b.Dir) // no folder: no pipeline asked yet
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.shown == nil {
		b.shown = map[string]time.Time{}
	}
	seen := map[string]bool{}
	for _, e := range entries {
		n := e.Name()
		if !strings.HasPrefix(n, "ask-") || !strings.HasSuffix(n, ".json") {
			continue
		}
		seen[n] = true
		m, ok := readAsk(filepath.Join(b.Dir, n))
		if !ok {
			continue
		}
		if at, ok := b.shown[n]; ok && at.Equal(m.At) {
			continue
		}
		if send(ctx, m.Chat, m.Content) == nil {
			b.shown[n] = m.At
		}
	}
	for n := range b.shown {
		if !seen[n] {
			delete(b.shown, n)
		}
	}
}
