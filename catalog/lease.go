package catalog

import (
	"sync"

	"github.com/nbots/nb/bot"
)

// served is a bot the catalog hands out. It is closed once it is retired
// (its file changed or went away, or it was a one-off bot) and no lease
// holds it any more: an exchange never loses its bot halfway.
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

// Leases are the bots one request, or one run, holds: a bot the catalog
// retires meanwhile (its file changed) is closed only once every lease
// on it is released. The zero value is ready; a nil *Leases holds
// nothing and lets every bot through.
type Leases struct {
	mu   sync.Mutex
	list []*served
	done bool
}

// add holds b; false when b is closed (or the leases already released).
func (l *Leases) add(b *served) bool {
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

// Inherit holds every bot that from holds, for a run that outlives the
// request that started it.
func (l *Leases) Inherit(from *Leases) {
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

// Adopt holds a bot built outside the catalog (a cartridge a client
// sent) and closes it when the leases are released, calling onClose (if
// set) with what closing returned. false when l is nil or released: the
// caller still owns b.
func (l *Leases) Adopt(b *bot.Bot, onClose func(error)) bool {
	if l == nil {
		return false
	}
	sv := &served{bot: b, onClose: onClose}
	if !l.add(sv) {
		return false
	}
	sv.retire() // closed when the leases let go
	return true
}

// Release lets go of every bot held; later adds fail.
func (l *Leases) Release() {
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
