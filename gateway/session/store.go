package session

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/nbots/nb/state"
)

// Sessions in a state.Store. Each line the file would hold (a metadata
// record, a message) is one event of the conversation, with the role
// Role and the line, byte for byte, as its message: the records are
// those of the files, read by the same decoder, and a session moves
// between the files and a store without a byte changing (see Import and
// Export). The conversation is only ever appended to:
//
//   - the metadata record is appended again when it changes, the last one
//     winning, as in the file;
//   - /new appends a marker ({"_type": "nb_new"}) and the new metadata
//     record in one append, where the file is replaced: what came before
//     the marker is the old session, kept as the file's .bak is kept.
//
// Lock is the conversation's Begin: one turn per session at a time
// across replicas, through the store's lease, a dead holder's session
// taken over when the lease expires. Appends during the turn go through
// it and are durable when they return (Sync has nothing left to do); a
// turn that lost its lease gets state.ErrLost from its next append and
// stops. Writes outside a turn (the heartbeat's and memory
// consolidation's metadata) take a short exchange of their own, as
// state.Append does, after rereading what other replicas appended.

// Role is the role of a session's records in a store.
const Role state.Role = "nanobot-session"

// EndUser is the end user under which a store keeps the gateway's
// sessions; the session key is the conversation's key.
const EndUser = "sessions"

// newMarker is the _type of the record that starts a session afresh in
// a store.
const newMarker = "nb_new"

// Bot is the identity of the sessions of the gateways of namespace in
// a store: gateways that share a database but not their conversations
// use different namespaces (the bus URL's namespace=).
func Bot(namespace string) state.Bot {
	if namespace == "" {
		namespace = "nb"
	}
	return state.Bot{Author: "nb", Name: "gateway", Version: namespace}
}

// storeSessions is where a Manager keeps its sessions in a store.
type storeSessions struct {
	store state.Store
	bot   state.Bot
}

// NewStoreManager returns the manager of the sessions of bot (see Bot)
// kept in st. Closing the manager leaves st open.
func NewStoreManager(st state.Store, bot state.Bot) (*Manager, error) {
	if _, err := state.BotPath(bot); err != nil {
		return nil, err
	}
	return &Manager{open: map[string]*Session{}, st: &storeSessions{store: st, bot: bot}}, nil
}

// Location says where the sessions are kept, for people: the folder, or
// the store's place.
func (m *Manager) Location() string {
	if m.st == nil {
		return m.Dir
	}
	loc, err := m.st.store.Location(m.st.bot)
	if err != nil {
		return err.Error()
	}
	return loc
}

// Stored tells a manager of a store from one of files.
func (m *Manager) Stored() bool { return m.st != nil }

// readTimeout bounds the reads of a session outside a turn.
const readTimeout = time.Minute

// loadStored reads the session of key from the store, without holding
// it: a session never stored is created when its first line is written.
func (m *Manager) loadStored(ctx context.Context, key string) (*Session, error) {
	conv, err := m.st.store.Open(m.st.bot, EndUser, key)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", key, err)
	}
	s := &Session{Key: key, Path: conv.HistoryLocation(), m: m, conv: conv, loaded: true}
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	h, err := conv.History(ctx)
	if err != nil {
		return nil, fmt.Errorf("session %s: %w", key, err)
	}
	if err := s.absorbLocked(h); err != nil {
		return nil, err
	}
	return s, nil
}

// line is the session line an event of the store holds.
func line(ev state.Event) (string, bool) {
	l, ok := ev.Message.(string)
	return l, ok && ev.Who == Role
}

// absorbLocked brings the session up to the conversation's records h:
// those appended since it last read them, or all of them when the
// conversation was deleted (and maybe written again) meanwhile.
func (s *Session) absorbLocked(h []state.Event) error {
	if first, _ := firstLine(h); len(h) < s.seen || (s.seen > 0 && first != s.first) {
		s.resetLocked()
	}
	if s.seen == 0 && len(h) > 0 {
		s.first, _ = firstLine(h)
	}
	return s.absorbTailLocked(h[s.seen:], len(h))
}

// resetLocked forgets what was read of the conversation.
func (s *Session) resetLocked() {
	s.meta, s.events, s.evBytes, s.size, s.seen, s.first, s.pending = Meta{}, nil, 0, 0, 0, "", nil
	s.gen++
}

// absorbTailLocked decodes the records after those read (tail), the
// conversation holding total records in all.
func (s *Session) absorbTailLocked(tail []state.Event, total int) error {
	defer func() { s.rec = nil }()
	for i, ev := range tail {
		l, ok := line(ev)
		if !ok {
			s.m.warn(fmt.Sprintf("session %s: record %d is not a session line: skipped", s.Path, s.seen+i+1))
			continue
		}
		s.size += int64(len(l))
		if strings.TrimSpace(l) == "" {
			continue
		}
		if err := s.decodeLine([]byte(l)); err != nil {
			s.m.warn(fmt.Sprintf("session %s: record %d: skipped a line that is not a message (%v)", s.Path, s.seen+i+1, err))
		}
	}
	if total > 0 {
		s.pending = nil // stored already, by another replica maybe
	}
	s.seen = total
	if s.meta.Type == "" {
		now := s.m.now().Format(TimeLayout)
		s.meta = Meta{Type: "metadata", Key: s.Key, CreatedAt: now, UpdatedAt: now, Metadata: map[string]any{}}
		if s.seen == 0 {
			b, err := s.marshal(s.meta)
			if err != nil {
				return err
			}
			s.pending = [][]byte{b}
		}
	}
	if s.meta.LastConsolidated > len(s.events) {
		s.meta.LastConsolidated = len(s.events)
	}
	return nil
}

func firstLine(h []state.Event) (string, bool) {
	if len(h) == 0 {
		return "", false
	}
	return line(h[0])
}

// storeLocked appends lines to the conversation, in the turn that holds
// it (held makes sure there is one), as one append.
func (s *Session) storeLocked(lines [][]byte) error {
	if s.turn == nil {
		return fmt.Errorf("session %s: written without holding it (a bug)", s.Path)
	}
	lines = append(s.pending[:len(s.pending):len(s.pending)], lines...)
	at := state.Now()
	events := make([]state.Event, len(lines))
	for i, l := range lines {
		events[i] = state.Event{At: at, Who: Role, Message: string(l)}
	}
	if err := s.turn.Append(events...); err != nil {
		return fmt.Errorf("session %s: %w", s.Path, err)
	}
	if s.seen == 0 {
		s.first = string(lines[0])
	}
	for _, l := range lines {
		s.size += int64(len(l))
	}
	s.seen += len(events)
	s.pending = nil
	return nil
}

// held runs fn with s.mu held and the session held: in the turn of this
// process that holds it (Lock) when there is one, else under a hold of
// its own (the file's lock, a short exchange of the store) taken with
// ctx after rereading what other processes or replicas appended. ctx
// does not cut fn short: a write to a store whose end was not seen would
// leave it unknown whether it was stored (the store bounds its writes).
func (s *Session) held(ctx context.Context, fn func() error) error {
	s.mu.Lock()
	if s.holds {
		defer s.mu.Unlock()
		return fn()
	}
	s.mu.Unlock()
	// Not under s.mu: the goroutine of a turn beginning now needs it.
	unlock, err := s.Lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	return fn()
}

// lockStored holds the session in the store for one turn (its lease),
// waiting for another replica's turn, and reads what was appended
// meanwhile.
func (s *Session) lockStored(ctx context.Context) (func(), error) {
	s.mu.Lock()
	n := s.seen
	s.mu.Unlock()
	var (
		t     state.Turn
		total int
		err   error
	)
	tb, tail := s.conv.(state.TailBeginner)
	if tail && n > 0 {
		// Only what was appended since: a long session is not read
		// whole at every turn.
		t, total, err = tb.BeginAfter(ctx, func() {}, n)
	} else {
		t, err = s.conv.Begin(ctx, func() {})
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("session %s: %w", s.Path, err)
	}
	s.mu.Lock()
	switch {
	case !tail || n == 0:
		err = s.absorbLocked(t.History())
	case total < n: // deleted since: the whole history
		s.resetLocked()
		err = s.absorbLocked(t.History())
	case s.seen >= n && s.seen <= total:
		// Those this process appended or reread while this turn
		// waited for the lease are skipped: the history is only ever
		// appended to, one holder at a time.
		err = s.absorbTailLocked(t.History()[s.seen-n:], total)
	default: // forgotten meanwhile (a reread found it deleted): read it whole
		var h []state.Event
		if h, err = s.conv.History(ctx); err == nil {
			err = s.absorbLocked(h)
		}
	}
	if err == nil {
		s.turn, s.holds = t, true
	}
	s.mu.Unlock()
	if err != nil {
		t.End()
		return nil, err
	}
	return func() {
		s.mu.Lock()
		s.turn, s.holds = nil, false
		s.mu.Unlock()
		t.End()
	}, nil
}

// Reread brings a session in a store up to what other replicas
// appended, without holding it (what /status shows); a session in files
// is reread at its next Lock only, as reading a file another process is
// appending to could take its last line for a torn one.
func (s *Session) Reread(ctx context.Context) error {
	if s.conv == nil {
		return nil
	}
	h, err := s.conv.History(ctx)
	if err != nil {
		return fmt.Errorf("session %s: %w", s.Path, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.holds {
		return nil // this process's turn has it as it is
	}
	return s.absorbLocked(h)
}

// marker is the record of /new in a store.
type marker struct {
	Type string `json:"_type"`
	At   string `json:"at"`
}

// clearStoredLocked appends /new's marker and the new metadata record.
func (s *Session) clearStoredLocked() error {
	now := s.m.now().Format(TimeLayout)
	mk, err := s.marshal(marker{Type: newMarker, At: now})
	if err != nil {
		return err
	}
	meta := Meta{Type: "metadata", Key: s.Key, CreatedAt: now, UpdatedAt: now, Metadata: s.meta.Metadata}
	if meta.Metadata == nil {
		meta.Metadata = map[string]any{}
	}
	b, err := s.marshal(meta)
	if err != nil {
		return err
	}
	if err := s.writeLocked(mk, b); err != nil {
		return err
	}
	s.meta, s.events, s.evBytes, s.size = meta, nil, 0, int64(len(b))
	return nil
}

// listStored lists the sessions of the store, most recent first.
func (m *Manager) listStored(ctx context.Context) ([]Info, error) {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	l, err := m.st.store.List(ctx, m.st.bot)
	if err != nil {
		return nil, fmt.Errorf("sessions: %w", err)
	}
	if l.Unreadable > 0 {
		m.warn(fmt.Sprintf("sessions in %s: %d cannot be read with this NANO_BOTS_ENCRYPTION_PASSWORD (another password, or none): left out", m.Location(), l.Unreadable))
	}
	out := make([]Info, 0, len(l.Keys))
	for _, k := range l.Keys {
		if k.EndUser == EndUser {
			out = append(out, Info{Key: k.Key, UpdatedAt: k.LastActivity})
		}
	}
	return out, nil
}
