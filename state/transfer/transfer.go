// Package transfer moves conversations between stores (the files and a
// database) without loss, as a stream of JSON lines: nb state export
// writes it, nb state import reads it. The first line is a header; each
// other line is one conversation: its bot, end user, key, last activity,
// history (the reference's records, byte for byte) and kept outputs.
// With a password the conversation lines are encrypted with it (the
// reference's scheme), so the stream is no less protected than the
// stores.
package transfer

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/nbots/nb/state"
)

// Version is the stream's format version, in its header.
const Version = 1

// Header is the stream's first line.
type Header struct {
	// Format is always Version.
	Format int `json:"nb_state_export"`
	// Encrypted says the conversation lines are encrypted.
	Encrypted bool `json:"encrypted"`
}

// Conversation is one line of the stream.
type Conversation struct {
	Bot          string            `json:"bot"` // state.BotPath
	EndUser      Text              `json:"end_user"`
	Key          Text              `json:"key"`
	LastActivity time.Time         `json:"last_activity"`
	History      []state.JSONEvent `json:"history"`
	Outputs      []Output          `json:"outputs,omitempty"`
}

// Output is a kept tool output.
type Output struct {
	Name Text `json:"name"`
	Text Text `json:"text"`
}

// Text is any text: a JSON string when it is valid UTF-8, else
// {"base64": "…"}, so that no byte is lost.
type Text string

// MarshalJSON writes the text.
func (t Text) MarshalJSON() ([]byte, error) {
	if utf8.ValidString(string(t)) {
		return json.Marshal(string(t))
	}
	return json.Marshal(map[string]string{"base64": base64.StdEncoding.EncodeToString([]byte(t))})
}

// UnmarshalJSON reads either form.
func (t *Text) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err == nil {
		*t = Text(s)
		return nil
	}
	var b struct {
		Base64 *string `json:"base64"`
	}
	if err := json.Unmarshal(data, &b); err != nil || b.Base64 == nil {
		return errors.New(`a text is a string or {"base64": "…"}`)
	}
	raw, err := base64.StdEncoding.DecodeString(*b.Base64)
	if err != nil {
		return fmt.Errorf("a text's base64: %w", err)
	}
	*t = Text(raw)
	return nil
}

// Stats counts what moved.
type Stats struct {
	Conversations, Events, Outputs int
	// Unreadable counts the conversations left out: stored with another
	// password, or damaged (see state.Listing).
	Unreadable int
	// Skipped counts the conversations not imported because the target
	// already held one under their names.
	Skipped int
}

// Export writes every conversation of s that cipher (nil: none) reads.
// s must be a state.Enumerator.
func Export(ctx context.Context, s state.Store, cipher *state.Cipher, w io.Writer) (Stats, error) {
	var st Stats
	en, ok := s.(state.Enumerator)
	if !ok {
		return st, errors.New("this store cannot list its conversations for an export")
	}
	bw := bufio.NewWriter(w)
	if err := writeLine(bw, Header{Format: Version, Encrypted: cipher != nil}, nil); err != nil {
		return st, err
	}
	bots, err := en.Bots(ctx)
	if err != nil {
		return st, err
	}
	for _, b := range bots {
		path, err := state.BotPath(b)
		if err != nil {
			return st, err
		}
		list, err := s.List(ctx, b)
		if err != nil {
			return st, err
		}
		st.Unreadable += list.Unreadable
		// Oldest first: an import that keeps the order of activity.
		keys := slices.Clone(list.Keys)
		slices.Reverse(keys)
		for _, k := range keys {
			c, err := s.Open(b, k.EndUser, k.Key)
			if err != nil {
				return st, err
			}
			history, err := c.History(ctx)
			if err != nil {
				return st, fmt.Errorf("export %s: %w", c.Location(), err)
			}
			line := Conversation{Bot: path, EndUser: Text(k.EndUser), Key: Text(k.Key), LastActivity: k.LastActivity, History: state.JSON(history)}
			if ol, ok := c.(state.OutputLister); ok {
				names, err := ol.Outputs(ctx)
				if err != nil {
					return st, fmt.Errorf("export %s: %w", c.Location(), err)
				}
				for _, n := range names {
					text, err := c.Output(ctx, n)
					if err != nil {
						return st, fmt.Errorf("export %s: %w", c.Location(), err)
					}
					line.Outputs = append(line.Outputs, Output{Name: Text(n), Text: Text(text)})
				}
			}
			if err := writeLine(bw, line, cipher); err != nil {
				return st, err
			}
			st.Conversations++
			st.Events += len(history)
			st.Outputs += len(line.Outputs)
		}
	}
	return st, bw.Flush()
}

func writeLine(w *bufio.Writer, v any, cipher *state.Cipher) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode the export: %w", err)
	}
	if cipher != nil {
		enc, err := cipher.Encrypt(b)
		if err != nil {
			return err
		}
		b = []byte(enc)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("write the export: %w", err)
	}
	return nil
}

// maxLine bounds a line of the stream: a conversation with its kept
// outputs.
const maxLine = 1 << 30

// Import stores the conversations of the stream r in s, each as one
// exchange; cipher (nil: none) decrypts an encrypted stream. A
// conversation that s already holds is left as it is and counted as
// skipped. Errors name the line.
func Import(ctx context.Context, s state.Store, cipher *state.Cipher, r io.Reader) (Stats, error) {
	var st Stats
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1<<20), maxLine)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return st, fmt.Errorf("read the export: %w", err)
		}
		return st, errors.New("the export is empty (no header line)")
	}
	var h Header
	if err := json.Unmarshal(sc.Bytes(), &h); err != nil || h.Format == 0 {
		return st, errors.New("line 1: not the header of nb state export")
	}
	if h.Format > Version {
		return st, fmt.Errorf("line 1: export format %d is newer than this nb reads (%d)", h.Format, Version)
	}
	if h.Encrypted && cipher == nil {
		return st, errors.New("the export is encrypted: set NANO_BOTS_ENCRYPTION_PASSWORD to the password it was exported with")
	}
	for n := 2; sc.Scan(); n++ {
		data := sc.Bytes()
		if len(data) == 0 {
			continue
		}
		if h.Encrypted {
			plain, err := cipher.Decrypt(string(data))
			if err != nil {
				return st, fmt.Errorf("line %d: %w", n, err)
			}
			data = plain
		}
		var c Conversation
		if err := json.Unmarshal(data, &c); err != nil {
			return st, fmt.Errorf("line %d: %v", n, err)
		}
		imported, err := importOne(ctx, s, c)
		if err != nil {
			return st, fmt.Errorf("line %d: %w", n, err)
		}
		if !imported {
			st.Skipped++
			continue
		}
		st.Conversations++
		st.Events += len(c.History)
		st.Outputs += len(c.Outputs)
	}
	if err := sc.Err(); err != nil {
		return st, fmt.Errorf("read the export: %w", err)
	}
	return st, nil
}

// importOne stores one conversation unless the target has it already.
func importOne(ctx context.Context, s state.Store, c Conversation) (bool, error) {
	b, err := state.BotFromPath(c.Bot)
	if err != nil {
		return false, err
	}
	conv, err := s.Open(b, string(c.EndUser), string(c.Key))
	if err != nil {
		return false, err
	}
	turn, err := conv.Begin(ctx, func() {})
	if err != nil {
		return false, err
	}
	defer turn.End()
	if len(turn.History()) > 0 {
		return false, nil
	}
	for _, o := range c.Outputs {
		if _, err := turn.KeepOutput(string(o.Name), string(o.Text)); err != nil {
			return false, fmt.Errorf("keep output %q in %s: %w", o.Name, conv.Location(), err)
		}
	}
	if err := turn.Append(state.FromJSON(c.History)...); err != nil {
		return false, fmt.Errorf("store %s: %w", conv.Location(), err)
	}
	if bd, ok := conv.(state.Backdater); ok && !c.LastActivity.IsZero() && len(c.History) > 0 {
		if err := bd.SetLastActivity(ctx, c.LastActivity); err != nil {
			return false, err
		}
	}
	return true, nil
}
