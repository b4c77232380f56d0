package server

import (
	"sync"

	"github.com/nbots/nb/bot"
)

// served is a bot the server hands out. It is closed once it is retired
// (its file changed or went away, or it was a client's cartridge) and no
// request or run holds it any more: an exchange never loses its bot
// halfway.
type served struct {
	bot     *bot.Bot
	onClose func(error)

	mu      sync.Mutex
	holders int
	retired bool
	closed  bool
}

// acquire takes a hold on the bot; false when it is already closed.
func (s *served) acquire() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.holders++
	return true
}

func (s *served) release() {
	s.mu.Lock()
	s.holders--
	closeNow := s.holders == 0 && s.retired && !s.closed
	if closeNow {
		s.closed = true
	}
	s.mu.Unlock()
	if closeNow {
		s.close()
	}
}

// retire closes the bot now if nobody holds it, else when the last
// holder lets go.
func (s *served) retire() {
	s.mu.Lock()
	s.retired = true
	closeNow := s.holders == 0 && !s.closed
	if closeNow {
		s.closed = true
	}
	s.mu.Unlock()
	if closeNow {
		s.close()
	}
}

func (s *served) close() {
	err := s.bot.Close()
	if s.onClose != nil {
		s.onClose(err)
	}
}

// leases are the bots one request, or one run, holds; they are released
// together when it ends.
type leases struct {
	mu   sync.Mutex
	list []*served
	done bool
}

// add holds b for the request or run; false when b is closed (or the
// leases already released).
func (l *leases) add(b *served) bool {
	if l == nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done || !b.acquire() {
		return false
	}
	l.list = append(l.list, b)
	return true
}

// inherit holds, for a run that outlives its request, every bot the
// request holds.
func (l *leases) inherit(from *leases) {
	if from == nil {
		return
	}
	from.mu.Lock()
	list := append([]*served(nil), from.list...)
	from.mu.Unlock()
	for _, b := range list {
		l.add(b)
	}
}

func (l *leases) release() {
	if l == nil {
		return
	}
	l.mu.Lock()
	list := l.list
	l.list, l.done = nil, true
	l.mu.Unlock()
	for _, b := range list {
		b.release()
	}
}
