package jetstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/nbots/nb/gateway/channel"
)

// stateTimeout bounds one read or write of a receive position or of the
// pairing book, within their callers' contexts.
const stateTimeout = 10 * time.Second

// Positions keeps the channels' receive positions (channel.Cursor) in the
// bucket <namespace>_positions, so that a receive loop elected on another
// machine resumes where the last one stopped. Values never expire.
type Positions struct {
	kv jetstream.KeyValue
	id string
	b  *Bus
}

// Positions returns the bus's receive positions for the replica named id.
func (b *Bus) Positions(ctx context.Context, id string) (*Positions, error) {
	kv, err := b.bucket(ctx, "positions", 0)
	if err != nil {
		return nil, err
	}
	return &Positions{kv: kv, id: id, b: b}, nil
}

// positionValue is what a key holds: the position and who wrote it (the
// replica and its opening of the position).
type positionValue struct {
	Position string `json:"position"`
	Holder   string `json:"holder"`
}

// Position is a channel.Cursor in the bucket: the receive loop that opens
// it takes it over, and a Save succeeds only while no other replica has
// opened it since (a write at the revision this one last wrote), so a
// replica that lost its election never moves the position back.
type Position struct {
	p      *Positions
	name   string // the caller's key, for messages
	key    string
	holder string

	mu  sync.Mutex
	pos string
	rev uint64
}

// Open opens the position key (a channel's position name and a hash of
// its account: never a token) and takes it over. When the bucket has no
// position yet, it starts from file's (a gateway that used files before
// the bus) and says so in the log. While the bus does not answer, Open
// waits for it (saying so in the log) until ctx, the receive loop's,
// ends.
func (p *Positions) Open(ctx context.Context, key string, file channel.Cursor) (*Position, error) {
	var nonce [4]byte
	rand.Read(nonce[:]) //nolint:errcheck // never fails
	c := &Position{p: p, name: key, key: kvKey(key), holder: p.id + "/" + hex.EncodeToString(nonce[:])}
	wait := 250 * time.Millisecond
	for conflicts := 0; conflicts < 20; {
		actx, cancel := context.WithTimeout(ctx, stateTimeout)
		conflict, err := c.open(actx, file)
		cancel()
		switch {
		case err == nil && !conflict:
			return c, nil
		case conflict:
			conflicts++ // moved meanwhile: read it again
		case errors.Is(err, errUnreadable) || ctx.Err() != nil:
			return nil, fmt.Errorf("receive position %s: %w", key, err)
		default:
			p.b.opt.Log.Warn("receive position: "+err.Error()+"; trying again", "position", key, "in", wait)
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("receive position %s: %w", key, err)
			case <-time.After(wait):
			}
			wait = min(wait*2, 5*time.Second)
		}
	}
	return nil, fmt.Errorf("receive position %s: changed by other replicas at every attempt to open it", key)
}

// errUnreadable marks what trying again does not mend.
var errUnreadable = errors.New("not readable")

// open tries once to take the position over; conflict is true when
// another replica wrote it in between.
func (c *Position) open(ctx context.Context, file channel.Cursor) (conflict bool, err error) {
	p := c.p
	e, err := p.kv.Get(ctx, c.key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		pos, ferr := file.Load(ctx)
		if ferr != nil {
			return false, fmt.Errorf("%w: the position to start from: %w", errUnreadable, ferr)
		}
		rev, err := p.kv.Create(ctx, c.key, c.encode(pos))
		if isConflict(err) {
			return true, nil // another replica created it meanwhile
		}
		if err != nil {
			return false, cleanErr(err)
		}
		if pos != "" {
			p.b.opt.Log.Info("receive position: none on the bus yet, starting from the file's, kept on the bus from now on", "position", c.name, "file", file.String(), "bucket", p.bucketName())
		}
		c.pos, c.rev = pos, rev
		return false, nil
	}
	if err != nil {
		return false, cleanErr(err)
	}
	var v positionValue
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return false, fmt.Errorf("%w: the value in bucket %s: %v", errUnreadable, p.bucketName(), err)
	}
	// Taking it over: a write at the revision read, so that the replica
	// that held it (if it still runs, having lost its election) can no
	// longer move it.
	rev, err := p.kv.Update(ctx, c.key, c.encode(v.Position), e.Revision())
	if isConflict(err) {
		return true, nil
	}
	if err != nil {
		return false, cleanErr(err)
	}
	c.pos, c.rev = v.Position, rev
	return false, nil
}

func (p *Positions) bucketName() string { return p.b.opt.Namespace + "_positions" }

func (c *Position) encode(pos string) []byte {
	b, _ := json.Marshal(positionValue{Position: pos, Holder: c.holder})
	return b
}

// String implements channel.Cursor.
func (c *Position) String() string {
	return "bucket " + c.p.bucketName() + ", key " + c.key
}

// Load implements channel.Cursor: the position taken over by Open, or
// the last saved.
func (c *Position) Load(context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pos, nil
}

// Save implements channel.Cursor: a write at the revision this opening
// last wrote. When another replica opened the position since, it fails
// with channel.ErrPositionTaken and changes nothing. ctx bounds the
// exchanges with the server.
func (c *Position) Save(ctx context.Context, pos string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, stateTimeout)
	defer cancel()
	for range 3 {
		rev, err := c.p.kv.Update(ctx, c.key, c.encode(pos), c.rev)
		if err == nil {
			c.pos, c.rev = pos, rev
			return nil
		}
		if !isConflict(err) {
			return fmt.Errorf("save receive position %s: %w", c.name, cleanErr(err))
		}
		// The key moved: by another replica, or by this one's previous
		// write whose answer was lost (it holds this opening's holder).
		e, gerr := c.p.kv.Get(ctx, c.key)
		if errors.Is(gerr, jetstream.ErrKeyNotFound) {
			// Deleted (by hand): the next receive loop to open it
			// starts it again.
			return fmt.Errorf("save receive position %s: %w", c.name, channel.ErrPositionTaken)
		}
		if gerr != nil {
			return fmt.Errorf("save receive position %s: %w", c.name, cleanErr(gerr))
		}
		var v positionValue
		if json.Unmarshal(e.Value(), &v) != nil || v.Holder != c.holder {
			return fmt.Errorf("save receive position %s: %w", c.name, channel.ErrPositionTaken)
		}
		c.rev = e.Revision()
	}
	return fmt.Errorf("save receive position %s: %w", c.name, channel.ErrPositionTaken)
}

var _ channel.Cursor = (*Position)(nil)
