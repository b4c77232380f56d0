// Package state stores conversations. Store is what a front-end and a
// backend need: open a conversation by (bot, end user, key), hold it for
// one exchange at a time, read its history, append events, list, delete,
// and keep large tool outputs. Files is the default Store: the
// specification's isolated paths, atomic writes under a file lock, and
// the reference implementation's at-rest encryption. Every Store passes
// the conformance suite in state/storetest.
package state

import (
	"context"
	"errors"
	"time"
)

// Implementation is nb's own component of the state path, which keeps its
// states apart from other implementations' (the specification asks for it).
const Implementation = "go-nano-bots"

// Bot identifies a cartridge's states.
type Bot struct {
	Author, Name, Version string
}

// Store keeps the conversations of bots.
type Store interface {
	// Open returns the conversation of a bot's end user under key. It
	// reads and writes nothing: a conversation is stored once a turn
	// appends to it.
	Open(b Bot, endUser, key string) (Conversation, error)
	// List returns a bot's stored conversations.
	List(ctx context.Context, b Bot) (Listing, error)
	// Location says where a bot's conversations are kept, for people
	// (a folder, a database without its credentials).
	Location(b Bot) (string, error)
}

// Conversation is one stored conversation: a bot, an end user and a key.
type Conversation interface {
	// Begin starts an exchange: while the turn is open no other exchange,
	// in this process or another (on another machine, for a shared
	// store), reads or writes the conversation. When another exchange
	// holds it, Begin calls onBusy once and waits for it (or for ctx);
	// with onBusy nil it returns ErrBusy at once. A store shared by
	// machines holds the conversation with a lease that expires when its
	// holder dies, so a dead holder's conversation is taken over. The
	// turn must be ended with End.
	Begin(ctx context.Context, onBusy func()) (Turn, error)
	// History reads the conversation without holding it: what the last
	// completed Append left. A conversation never stored is empty.
	History(ctx context.Context) ([]Event, error)
	// Output returns a tool output kept by Turn.KeepOutput.
	Output(ctx context.Context, id string) (string, error)
	// Delete removes everything stored for the conversation (history,
	// kept outputs), waiting for an exchange in progress (or for ctx).
	// Deleting a conversation with nothing stored is not an error:
	// existed tells whether there was anything.
	Delete(ctx context.Context) (existed bool, err error)
	// Location says where the conversation is kept, for people.
	Location() string
	// HistoryLocation says where its history is kept, for people.
	HistoryLocation() string
}

// Turn is one exchange's hold on a conversation. History is read once,
// when the turn begins; each Append is durable when it returns, and a
// crash during an Append leaves the history with all of its events or
// none. A Turn is used by one goroutine at a time.
type Turn interface {
	// History is the conversation as stored, with the events this turn
	// appended. The caller must not modify it.
	History() []Event
	// Append adds events to the history. It fails with ErrLost when the
	// store can no longer promise that no other exchange writes the
	// conversation (a lease that expired and was taken over): the
	// exchange must stop.
	Append(events ...Event) error
	// KeepOutput keeps the whole of a tool's output, too large for the
	// history, under the call's id; where says where it is, for the model
	// and for people (a file's path for Files).
	KeepOutput(id, text string) (where string, err error)
	// End releases the conversation. It is safe to call more than once.
	End()
}

// TailBeginner is a Conversation that can begin an exchange reading only
// the events after the first n of its history, for a caller that has
// those already (the gateway's sessions, reread at every turn). The
// turn's History is those events (and then what it appends); total is
// the number of events stored. When fewer than n are stored (the
// conversation was deleted since), History is the whole history and
// total its length.
type TailBeginner interface {
	BeginAfter(ctx context.Context, onBusy func(), n int) (t Turn, total int, err error)
}

// ErrBusy is returned by Begin when another exchange holds the
// conversation and the caller does not want to wait.
var ErrBusy = errors.New("another exchange is running on this state key")

// ErrLost is returned by Turn.Append when the turn's hold on the
// conversation was lost.
var ErrLost = errors.New("the exchange lost its hold on the state key (another took it over): its events were not stored")

// KeyInfo describes one stored conversation of a cartridge.
type KeyInfo struct {
	EndUser, Key string
	// LastActivity is when the history was last written.
	LastActivity time.Time
	// Events is the number of history entries.
	Events int
}

// Listing is what List finds for a cartridge.
type Listing struct {
	// Keys are the conversations that can be read, most recent first.
	Keys []KeyInfo
	// Unreadable counts the conversations that cannot be read with the
	// current cipher: stored with another password, encrypted while no
	// password is set, or damaged.
	Unreadable int
}

// Append adds events to a conversation as one exchange of its own (Begin,
// Append, End), waiting for the conversation if another exchange holds
// it.
func Append(ctx context.Context, c Conversation, events ...Event) error {
	if len(events) == 0 {
		return nil
	}
	t, err := c.Begin(ctx, func() {})
	if err != nil {
		return err
	}
	defer t.End()
	return t.Append(events...)
}

// BusyWait is how a Begin waits for a conversation another exchange
// holds: it calls onBusy once, then sleeps between tries, from First
// doubling to Max, or until wake (nil: never) says the conversation may
// be free.
type BusyWait struct {
	First, Max time.Duration
	told       bool
	delay      time.Duration
}

// Wait waits before the next try; it fails with ctx's error.
func (w *BusyWait) Wait(ctx context.Context, onBusy func(), wake <-chan struct{}) error {
	if !w.told {
		onBusy()
		w.told = true
		w.delay = w.First
	}
	t := time.NewTimer(w.delay)
	defer t.Stop()
	w.delay = min(w.delay*2, w.Max)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-wake:
	case <-t.C:
	}
	return nil
}
