package jetstream

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/nbots/nb/gateway/bus"
)

// Steering is the gateway's shared steering (gateway.SharedSteering) on
// the bus: a message that arrives during a turn is offered to every
// replica over core NATS (<namespace>.steer: at most once, as an offer
// that is lost only makes the message the next turn), and the messages
// a completed turn took are recorded in the bucket <namespace>_steered
// (24 hours, as delivered replies), where the replica the bus delivers
// one to finds it.
type Steering struct {
	b   *Bus
	set keySet
}

// Steering returns the bus's shared steering.
func (b *Bus) Steering(ctx context.Context) (*Steering, error) {
	kv, err := b.bucket(ctx, "steered", deliveredTTL)
	if err != nil {
		return nil, err
	}
	return &Steering{b: b, set: keySet{kv, "steered messages"}}, nil
}

func (s *Steering) subject() string { return s.b.opt.Namespace + ".steer" }

// Offer sends m to every replica.
func (s *Steering) Offer(_ context.Context, m bus.Inbound) error {
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("steering offer: %w", err)
	}
	if err := s.b.nc.Publish(s.subject(), data); err != nil {
		return fmt.Errorf("steering offer: %w", cleanErr(err))
	}
	return nil
}

// Offers gives fn every replica's offers until ctx ends.
func (s *Steering) Offers(ctx context.Context, fn func(bus.Inbound)) error {
	sub, err := s.b.nc.Subscribe(s.subject(), func(msg *nats.Msg) {
		var m bus.Inbound
		if json.Unmarshal(msg.Data, &m) == nil {
			fn(m)
		}
	})
	if err != nil {
		return fmt.Errorf("steering offers: %w", cleanErr(err))
	}
	<-ctx.Done()
	sub.Unsubscribe() //nolint:errcheck // the connection may be closing
	return nil
}

// Took records that a completed turn took the messages of keys.
func (s *Steering) Took(ctx context.Context, keys []string) error {
	for _, k := range keys {
		if err := s.set.add(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// Taken reports whether a completed turn took the message of key.
func (s *Steering) Taken(ctx context.Context, key string) (bool, error) { return s.set.has(ctx, key) }
