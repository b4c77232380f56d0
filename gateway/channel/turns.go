package channel

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"sync"

	"github.com/nbots/nb/gateway/bus"
)

// Turns remembers, per chat and turn, what a channel already delivered:
// the message its streamed progress edits, and how many pieces of a split
// answer went out before a 429, so that the retry sends the rest and
// nothing twice. Its zero value is ready.
type Turns struct {
	mu       sync.Mutex
	progress map[string]string
	pieces   map[string]int
}

// TurnKey identifies m's turn in its chat ("" when m has no turn).
func TurnKey(m bus.Outbound) string {
	if m.Turn == "" {
		return ""
	}
	return m.ChatID + "\x00" + m.Turn
}

// PieceKey names piece i (its text or a file's description) of a turn's
// final message or error the same way on every try and on every replica:
// "nb" and 22 hex digits, within the 25 characters of Discord's nonce.
// A platform that takes an idempotency key (Matrix's transaction id,
// Discord's enforced nonce) answers a repeated send with the first
// message instead of posting twice. ok is false for progress and for
// messages outside a turn, which need no key.
func PieceKey(m bus.Outbound, i int, piece string) (key string, ok bool) {
	tk := TurnKey(m)
	if tk == "" || m.Kind == bus.Progress {
		return "", false
	}
	h := sha256.Sum256([]byte(tk + "\x00" + string(m.Kind) + "\x00" + strconv.Itoa(i) + "\x00" + piece))
	return "nb" + hex.EncodeToString(h[:11]), true
}

// Progress is the id of the message that shows the turn's progress.
func (t *Turns) Progress(key string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id, ok := t.progress[key]
	return id, ok
}

// SetProgress records the turn's progress message ("" forgets it).
func (t *Turns) SetProgress(key, id string) {
	if key == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if id == "" {
		delete(t.progress, key)
		return
	}
	if t.progress == nil || len(t.progress) > 10_000 {
		t.progress = map[string]string{} // turns that never finished
	}
	t.progress[key] = id
}

// Sent is how many pieces of the turn's message of kind k went out.
func (t *Turns) Sent(key string, k bus.Kind) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pieces[key+"\x00"+string(k)]
}

// SetSent records that n pieces went out (0 forgets the message).
func (t *Turns) SetSent(key string, k bus.Kind, n int) {
	if key == "" {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if n == 0 {
		delete(t.pieces, key+"\x00"+string(k))
		return
	}
	if t.pieces == nil || len(t.pieces) > 10_000 {
		t.pieces = map[string]int{}
	}
	t.pieces[key+"\x00"+string(k)] = n
}

// Deliver sends the pieces of m's text: a turn's progress is posted once
// (its first piece) and then edited in place; the turn's final message or
// error replaces the progress message with its first piece and posts the
// rest. A failure leaves the count of pieces sent, so that the retry of
// the same turn's message sends the rest and none twice (an
// *Undeliverable forgets it). It returns the platform id of the last
// message written.
func Deliver[P any](t *Turns, m bus.Outbound, ps []P, post func(i int, p P) (string, error), edit func(id string, p P) error) (string, error) {
	if len(ps) == 0 {
		return "", nil
	}
	key := TurnKey(m)
	if key != "" && m.Kind != bus.ToolHint {
		if id, ok := t.Progress(key); ok {
			if err := edit(id, ps[0]); err != nil {
				return "", err
			}
			if m.Kind == bus.Progress {
				return id, nil
			}
			t.SetProgress(key, "")
			if len(ps) == 1 {
				return id, nil
			}
			ps = ps[1:]
		}
	}
	if m.Kind == bus.Progress {
		ps = ps[:1]
	}
	var last string
	for i := t.Sent(key, m.Kind); i < len(ps); i++ {
		id, err := post(i, ps[i])
		if err != nil {
			if IsUndeliverable(err) {
				i = 0
			}
			t.SetSent(key, m.Kind, i)
			return last, err
		}
		last = id
	}
	t.SetSent(key, m.Kind, 0)
	if m.Kind == bus.Progress {
		t.SetProgress(key, last)
	}
	return last, nil
}

// part is a piece of an answer's text in the platform's form, or a file.
type part[P any] struct {
	text P
	file *Attachment
}

// DeliverFiles is Deliver for an answer with files: the pieces of its
// text, then each file by send (i counts the text's pieces and the
// files). A file that would replace a turn's progress message is sent
// after it instead, the progress left as it is.
func DeliverFiles[P any](t *Turns, m bus.Outbound, ps []P, files []Attachment, post func(i int, p P) (string, error), edit func(id string, p P) error, send func(i int, f *Attachment) (string, error)) (string, error) {
	all := make([]part[P], 0, len(ps)+len(files))
	for _, p := range ps {
		all = append(all, part[P]{text: p})
	}
	for i := range files {
		all = append(all, part[P]{file: &files[i]})
	}
	return Deliver(t, m, all, func(i int, p part[P]) (string, error) {
		if p.file != nil {
			return send(i, p.file)
		}
		return post(i, p.text)
	}, func(id string, p part[P]) error {
		if p.file != nil {
			_, err := send(0, p.file)
			return err
		}
		return edit(id, p.text)
	})
}
