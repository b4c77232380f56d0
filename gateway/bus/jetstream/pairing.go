package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nbots/nb/gateway/access"
)

// pairingKey is the key of the pairing book in <namespace>_pairing (one
// gateway per namespace).
const pairingKey = "book"

// Pairings is access.Pairings in the bucket <namespace>_pairing: the
// pairing codes and approvals as one JSON document, changed at the
// revision read (so two replicas' changes never overwrite each other),
// never expiring. Every replica keeps a copy that a watch of the key
// keeps current, so the check of each message reads memory, and an
// approval given on one replica is seen by the others as soon as the
// server tells them (milliseconds).
type Pairings struct {
	kv jetstream.KeyValue
	b  *Bus

	mu   sync.Mutex
	book access.Book
	rev  uint64
}

// Pairings reads the bus's pairing book and keeps it current until the
// bus closes.
func (b *Bus) Pairings(ctx context.Context) (*Pairings, error) {
	kv, err := b.bucket(ctx, "pairing", 0)
	if err != nil {
		return nil, err
	}
	p := &Pairings{kv: kv, b: b}
	if _, _, err := p.latest(ctx); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errors.New("the bus is closed")
	}
	b.running.Add(1)
	go p.watch()
	return p, nil
}

// String implements access.Pairings.
func (p *Pairings) String() string {
	return "bucket " + p.b.opt.Namespace + "_pairing"
}

// Read implements access.Pairings: the copy in memory.
func (p *Pairings) Read() access.Book {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.book
}

// Update implements access.Pairings: change is applied to the book read
// from the server and written at its revision, again from a fresh read
// when another replica wrote first. ctx bounds the exchanges with the
// server.
func (p *Pairings) Update(ctx context.Context, change func(*access.Book)) (access.Book, error) {
	ctx, cancel := context.WithTimeout(ctx, stateTimeout)
	defer cancel()
	for range 50 {
		b, rev, err := p.latest(ctx)
		if err != nil {
			return access.Book{}, err
		}
		b = access.Book{Pending: append([]access.Pending(nil), b.Pending...), Approved: append([]access.Approval(nil), b.Approved...)}
		change(&b)
		data, err := json.Marshal(b)
		if err != nil {
			return access.Book{}, err
		}
		var next uint64
		if rev == 0 {
			next, err = p.kv.Create(ctx, pairingKey, data)
		} else {
			next, err = p.kv.Update(ctx, pairingKey, data, rev)
		}
		if isConflict(err) {
			continue // another replica wrote first: change the newer book
		}
		if err != nil {
			return access.Book{}, cleanErr(err)
		}
		p.keep(b, next)
		return b, nil
	}
	return access.Book{}, errors.New("changed by other replicas at every attempt")
}

// latest reads the book from the server (revision 0: none yet) and keeps
// it as the copy when it is newer.
func (p *Pairings) latest(ctx context.Context) (access.Book, uint64, error) {
	e, err := p.kv.Get(ctx, pairingKey)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return access.Book{}, 0, nil
	}
	if err != nil {
		return access.Book{}, 0, fmt.Errorf("pairing store %s: %w", p, cleanErr(err))
	}
	b := p.decode(e)
	p.keep(b, e.Revision())
	return b, e.Revision(), nil
}

// decode reads an entry; an unreadable book is an empty one, with a
// warning, as the file store does.
func (p *Pairings) decode(e jetstream.KeyValueEntry) access.Book {
	var b access.Book
	if e.Operation() != jetstream.KeyValuePut {
		return b
	}
	if err := json.Unmarshal(e.Value(), &b); err != nil {
		p.b.opt.Log.Warn(fmt.Sprintf("pairing store %s is not valid JSON (%v): starting from an empty one; approvals must be given again", p, err))
		return access.Book{}
	}
	return b
}

func (p *Pairings) keep(b access.Book, rev uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if rev > p.rev {
		p.book, p.rev = b, rev
	}
}

// watch keeps the copy current until the bus closes, watching again
// when the connection comes back (the server may have restarted).
func (p *Pairings) watch() {
	b := p.b
	defer b.running.Done()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-b.done
		cancel()
	}()
	for ctx.Err() == nil {
		b.mu.Lock()
		reconnected := b.reconnected
		b.mu.Unlock()
		w, err := p.kv.Watch(ctx, pairingKey)
		if err != nil {
			if ctx.Err() == nil {
				b.opt.Log.Warn("bus: watching the pairing store: " + cleanErr(err).Error() + "; trying again")
			}
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
	updates:
		for {
			select {
			case e, ok := <-w.Updates():
				if !ok {
					break updates
				}
				if e != nil {
					p.keep(p.decode(e), e.Revision())
				}
			case <-reconnected:
				break updates
			case <-ctx.Done():
				break updates
			}
		}
		w.Stop() //nolint:errcheck // watching again, or done
	}
}

var _ access.Pairings = (*Pairings)(nil)
