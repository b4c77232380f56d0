package gateway

import (
	"context"
	"sync"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/replica"
)

// Alone sets the replica and steering seams of a gateway that runs
// alone, in one process: it leads every election and claims every slot
// (replica.Local), no other replica runs turns, and the messages that
// arrive during a turn are offered to it here (LocalSteering).
func (g *Gateway) Alone() {
	local := &replica.Local{}
	g.Elector, g.Others, g.Steer = local, local, &LocalSteering{g: g}
}

// LocalSteering is the steering of one gateway alone: an offer reaches
// the turns running in this process at once, and the messages completed
// turns took are remembered here until the bus delivers them, once.
type LocalSteering struct {
	g     *Gateway
	mu    sync.Mutex
	taken map[string]bool
}

// Offer gives m to the session's running turn, if any.
func (s *LocalSteering) Offer(ctx context.Context, m bus.Inbound) error {
	s.g.offer(ctx, m)
	return nil
}

// Offers waits for ctx to end: Offer reaches this process's turns
// itself.
func (s *LocalSteering) Offers(ctx context.Context, _ func(bus.Inbound)) error {
	<-ctx.Done()
	return nil
}

// Took remembers the keys of the messages a completed turn took.
func (s *LocalSteering) Took(_ context.Context, keys []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.taken == nil {
		s.taken = map[string]bool{}
	}
	for _, k := range keys {
		s.taken[k] = true
	}
	return nil
}

// Taken reports whether a completed turn took the message of key, and
// forgets it: the bus delivers a message once.
func (s *LocalSteering) Taken(_ context.Context, key string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.taken[key] {
		delete(s.taken, key)
		return true, nil
	}
	return false, nil
}

// NoSteering steers nothing: a message that arrives during a turn is
// the next turn. Replicas that share no steering use it, since the bus's
// copy of a message a turn took could reach a replica that does not know.
type NoSteering struct{}

// Offer implements SharedSteering: the message waits on the bus.
func (NoSteering) Offer(context.Context, bus.Inbound) error { return nil }

// Offers implements SharedSteering: none come.
func (NoSteering) Offers(ctx context.Context, _ func(bus.Inbound)) error {
	<-ctx.Done()
	return nil
}

// Took implements SharedSteering: no turn takes a message.
func (NoSteering) Took(context.Context, []string) error { return nil }

// Taken implements SharedSteering: no turn took one.
func (NoSteering) Taken(context.Context, string) (bool, error) { return false, nil }
