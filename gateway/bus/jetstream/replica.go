package jetstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nbots/nb/gateway/replica"
)

// DefaultLeaseTTL is how long a leader's lease lasts without renewal: a
// dead leader's receive loop moves to another replica within it (plus a
// quarter of it, how often standbys look).
const DefaultLeaseTTL = 2 * time.Second

// Bucket lifetimes: a claim must outlive any replay of its slot; a
// delivered reply must outlive any redelivery of it (both far shorter).
const (
	claimsTTL    = 48 * time.Hour
	deliveredTTL = 24 * time.Hour
)

// bucket opens (creating it if missing) the namespace's key-value bucket
// of that name, whose values expire after ttl.
func (b *Bus) bucket(ctx context.Context, name string, ttl time.Duration) (jetstream.KeyValue, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if kv, ok := b.kv[name]; ok {
		return kv, nil
	}
	kv, err := b.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      b.opt.Namespace + "_" + name,
		Description: "nb gateway " + name + " (" + b.opt.Namespace + ")",
		TTL:         ttl,
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    b.opt.StreamReplicas,
	})
	if err != nil {
		return nil, fmt.Errorf("bucket %s_%s: %w", b.opt.Namespace, name, cleanErr(err))
	}
	b.kv[name] = kv
	return kv, nil
}

var kvKeyRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[-_=.a-zA-Z0-9]{1,200}$`) })

// kvKey is key when it is a valid bucket key, else its hash.
func kvKey(key string) string {
	if kvKeyRe().MatchString(key) && key[0] != '.' && key[len(key)-1] != '.' {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "h" + hex.EncodeToString(sum[:20])
}

// Elector is replica.Elector on the bucket <namespace>_leaders: the
// leader of a key is the replica whose Create of it succeeded, for as
// long as it renews it (an Update at the revision it holds) before the
// bucket's TTL removes it.
type Elector struct {
	kv  jetstream.KeyValue
	id  string
	ttl time.Duration
	b   *Bus
}

// Elector returns the bus's elector for the replica named id (unique
// among replicas); ttl 0 is DefaultLeaseTTL.
func (b *Bus) Elector(ctx context.Context, id string, ttl time.Duration) (*Elector, error) {
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	kv, err := b.bucket(ctx, "leaders", ttl)
	if err != nil {
		return nil, err
	}
	return &Elector{kv: kv, id: id, ttl: ttl, b: b}, nil
}

// Lead implements replica.Elector. fn's context ends when a renewal has
// not succeeded for three quarters of the TTL, before the server lets
// another replica take the key. When fn returns before ctx ends, the
// lease is released and Lead returns fn's error.
func (e *Elector) Lead(ctx context.Context, key string, fn func(context.Context) error, standby func()) error {
	k := kvKey(key)
	wasStandby := false
	for ctx.Err() == nil {
		rev, err := e.kv.Create(ctx, k, []byte(e.id))
		switch {
		case err == nil:
			wasStandby = false
			done, ferr := e.lead(ctx, k, rev, fn)
			if done {
				return ferr
			}
			e.b.opt.Log.Warn("replica: lost the lead", "key", key)
			continue
		case errors.Is(err, jetstream.ErrKeyExists):
			if !wasStandby && standby != nil {
				standby()
			}
			wasStandby = true
		case ctx.Err() == nil:
			e.b.opt.Log.Warn("replica: election: "+cleanErr(err).Error(), "key", key)
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(e.ttl/4, 500*time.Millisecond)):
		}
	}
	return nil
}

// lead runs fn while renewing the lease; done is true when fn returned
// by itself or ctx ended (the lease is released), false when the lease
// was lost.
func (e *Elector) lead(ctx context.Context, k string, rev uint64, fn func(context.Context) error) (done bool, err error) {
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	result := make(chan error, 1)
	go func() { result <- fn(fctx) }()
	renewed := time.Now()
	tick := time.NewTicker(e.ttl / 4)
	defer tick.Stop()
	release := func() {
		// A fresh context: ctx may have ended, the key should still go,
		// so that another replica leads at once.
		rctx, rcancel := context.WithTimeout(context.Background(), time.Second)
		defer rcancel()
		e.kv.Delete(rctx, k, jetstream.LastRevision(rev)) //nolint:errcheck // it expires anyway
	}
	for {
		select {
		case err := <-result:
			release()
			return true, err
		case <-tick.C:
			at := time.Now()
			rctx, rcancel := context.WithTimeout(ctx, e.ttl/4)
			next, err := e.kv.Update(rctx, k, []byte(e.id), rev)
			rcancel()
			switch {
			case err == nil:
				rev, renewed = next, at
			case isConflict(err) || time.Since(renewed) > e.ttl*3/4:
				// Another replica holds it, or it may have expired.
				cancel()
				<-result
				if ctx.Err() != nil {
					return true, nil
				}
				return false, nil
			}
		case <-ctx.Done():
			<-result
			release()
			return true, nil
		}
	}
}

// Claims is replica.Claims on the bucket <namespace>_claims: a key is
// claimed by the replica whose Create of it succeeds.
type Claims struct {
	kv jetstream.KeyValue
	id string
}

// Claims returns the bus's claims for the replica named id.
func (b *Bus) Claims(ctx context.Context, id string) (*Claims, error) {
	kv, err := b.bucket(ctx, "claims", claimsTTL)
	if err != nil {
		return nil, err
	}
	return &Claims{kv: kv, id: id}, nil
}

// Claim implements replica.Claims.
func (c *Claims) Claim(ctx context.Context, key string) (bool, error) {
	_, err := c.kv.Create(ctx, kvKey(key), []byte(c.id))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrKeyExists):
		return false, nil
	default:
		return false, fmt.Errorf("claim %s: %w", key, cleanErr(err))
	}
}

// keySet is a set of keys in a bucket: a key is in it once put, until
// the bucket's TTL removes it.
type keySet struct {
	kv   jetstream.KeyValue
	what string // for errors: "delivered replies"
}

// has reports whether key is in the set.
func (s keySet) has(ctx context.Context, key string) (bool, error) {
	_, err := s.kv.Get(ctx, kvKey(key))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false, nil
	default:
		return false, fmt.Errorf("%s: %w", s.what, cleanErr(err))
	}
}

// add puts key in the set.
func (s keySet) add(ctx context.Context, key string) error {
	if _, err := s.kv.Put(ctx, kvKey(key), nil); err != nil {
		return fmt.Errorf("%s: %w", s.what, cleanErr(err))
	}
	return nil
}

// Delivered is the dispatcher's record of delivered final replies
// (dispatch.Delivered) on the bucket <namespace>_delivered, so that a
// reply delivered by one replica is not delivered again by another.
type Delivered struct {
	set keySet
}

// Delivered returns the bus's record of delivered replies.
func (b *Bus) Delivered(ctx context.Context) (*Delivered, error) {
	kv, err := b.bucket(ctx, "delivered", deliveredTTL)
	if err != nil {
		return nil, err
	}
	return &Delivered{set: keySet{kv, "delivered replies"}}, nil
}

// Seen reports whether the reply of key was delivered.
func (d *Delivered) Seen(ctx context.Context, key string) (bool, error) { return d.set.has(ctx, key) }

// Record records that the reply of key was delivered.
func (d *Delivered) Record(ctx context.Context, key string) error { return d.set.add(ctx, key) }

var (
	_ replica.Elector = (*Elector)(nil)
	_ replica.Claims  = (*Claims)(nil)
)

// Stopper is replica.Stopper on core NATS: a request on <namespace>.stop
// that every other replica answers with how many turns it stopped.
type Stopper struct {
	b   *Bus
	id  string
	sub *nats.Subscription
}

// stopWait is how long a /stop waits for the other replicas' answers.
const stopWait = 500 * time.Millisecond

// Stopper subscribes the replica named id to the others' stops, which
// here runs stop (it returns how many turns it cancelled). Close ends it.
func (b *Bus) Stopper(id string, stop func(key string) int) (*Stopper, error) {
	sub, err := b.nc.Subscribe(b.opt.Namespace+".stop", func(m *nats.Msg) {
		if m.Header.Get("Nb-Replica") == id || m.Reply == "" {
			return
		}
		n := stop(string(m.Data))
		m.Respond([]byte(strconv.Itoa(n))) //nolint:errcheck // the asker counts what arrives
	})
	if err == nil {
		// The server knows the subscription once this returns.
		err = b.nc.FlushTimeout(5 * time.Second)
	}
	if err != nil {
		return nil, fmt.Errorf("stops: %w", cleanErr(err))
	}
	return &Stopper{b: b, id: id, sub: sub}, nil
}

// Stop implements replica.Stopper: it counts the answers that arrive
// within half a second.
func (s *Stopper) Stop(ctx context.Context, key string) (int, error) {
	inbox := s.b.nc.NewRespInbox()
	answers := make(chan *nats.Msg, 64)
	sub, err := s.b.nc.ChanSubscribe(inbox, answers)
	if err != nil {
		return 0, fmt.Errorf("stop: %w", cleanErr(err))
	}
	defer sub.Unsubscribe() //nolint:errcheck // done with it
	msg := nats.NewMsg(s.b.opt.Namespace + ".stop")
	msg.Reply = inbox
	msg.Header.Set("Nb-Replica", s.id)
	msg.Data = []byte(key)
	if err := s.b.nc.PublishMsg(msg); err != nil {
		return 0, fmt.Errorf("stop: %w", cleanErr(err))
	}
	n := 0
	timeout := time.NewTimer(stopWait)
	defer timeout.Stop()
	for {
		select {
		case m := <-answers:
			k, _ := strconv.Atoi(string(m.Data))
			n += k
		case <-timeout.C:
			return n, nil
		case <-ctx.Done():
			return n, ctx.Err()
		}
	}
}

// Close stops answering the others.
func (s *Stopper) Close() error { return s.sub.Unsubscribe() }

var _ replica.Stopper = (*Stopper)(nil)
