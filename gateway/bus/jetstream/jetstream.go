// Package jetstream is the gateway's bus shared by replicas: bus.Bus on
// NATS JetStream, with the elections and claims that make one replica
// run a channel's receive loop, a cron slot or a heartbeat (package
// replica). Messages are durable in streams; what guarantees order and
// exclusivity is the server's, not ours: see docs/scale-out.md.
//
// Inbound messages go to subject <ns>.in.<p>, where p is the session's
// partition (a hash of the session key modulo Partitions), into a
// work-queue stream deduplicating on Nats-Msg-Id = "<channel>:<id>".
// Each partition has one durable pull consumer shared by every replica,
// with MaxAckPending 1: the server hands the partition's next message to
// one replica only once the previous one was acknowledged, so a session
// is handled by one replica at a time, in order, and a message whose
// replica died (no acknowledgement, no progress within AckWait) goes to
// another replica before anything after it. Outbound messages do the same
// per (channel, destination partition); final replies carry Nats-Msg-Id
// "<turn>:<channel>:<chat>", so a turn run again after a crash is queued
// once.
package jetstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/nbots/nb/gateway/bus"
)

// Defaults of Options.
const (
	// DefaultPartitions is how many inbound (and, per channel, outbound)
	// partitions there are: sessions in one partition wait for each
	// other, so it bounds how many turns run at once across replicas.
	DefaultPartitions = 64
	// DefaultDuplicateWindow is how long a platform message id is
	// remembered: longer than any replay of a receive loop that moved to
	// another replica (a Telegram poller resumes from its saved offset;
	// an IMAP mailbox is searched again), short enough to keep the
	// server's memory of ids small (one entry per message of the hour).
	DefaultDuplicateWindow = time.Hour
	// DefaultAckWait is how long a message may go without its replica's
	// word before it goes to another one: a running handler says "in
	// progress" every third of it, so it is the failover time of a
	// session whose replica died, not a bound on a turn.
	DefaultAckWait = 3 * time.Second
)

// Options configure a Bus. Replicas of one gateway use the same ones.
type Options struct {
	// Namespace prefixes subjects, streams, consumers and buckets
	// (default "nb"): gateways of different workspaces share one NATS
	// with different namespaces.
	Namespace string
	// Partitions (default DefaultPartitions) must not change while
	// messages are queued.
	Partitions int
	// DuplicateWindow (default DefaultDuplicateWindow).
	DuplicateWindow time.Duration
	// AckWait (default DefaultAckWait).
	AckWait time.Duration
	// Retry is the wait before a message whose handler failed is
	// delivered again, doubling up to 30 times it (default 200 ms).
	Retry time.Duration
	// Broadcast are channels whose outbound messages go to every replica
	// at most once instead of through a stream: the web chat and the
	// terminal, whose sockets live in one replica (default "web", "cli").
	Broadcast []string
	// StreamReplicas is the streams' and buckets' replication in a NATS
	// cluster (default 1).
	StreamReplicas int
	// Log receives what cannot be returned (an undecodable message).
	Log *slog.Logger
}

func (o *Options) defaults() {
	if o.Namespace == "" {
		o.Namespace = "nb"
	}
	if o.Partitions <= 0 {
		o.Partitions = DefaultPartitions
	}
	if o.DuplicateWindow <= 0 {
		o.DuplicateWindow = DefaultDuplicateWindow
	}
	if o.AckWait <= 0 {
		o.AckWait = DefaultAckWait
	}
	if o.Retry <= 0 {
		o.Retry = 200 * time.Millisecond
	}
	if o.Broadcast == nil {
		o.Broadcast = []string{"web", "cli"}
	}
	if o.StreamReplicas <= 0 {
		o.StreamReplicas = 1
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// Bus is bus.Bus on NATS JetStream.
type Bus struct {
	opt      Options
	nc       *nats.Conn
	js       jetstream.JetStream
	url      string // redacted
	in, out  string // stream names
	ownsConn bool

	mu     sync.Mutex
	closed bool
	done   chan struct{}
	// reconnected is closed (and replaced) when the connection comes
	// back: the server may have restarted without the consumers.
	reconnected chan struct{}
	running     sync.WaitGroup
	kv          map[string]jetstream.KeyValue
	// outStream is the outbound stream, asked for its depth (depth.go);
	// depths are the last readings by channel, depthFailing whether the
	// last one failed.
	outStream    jetstream.Stream
	depths       map[string][2]int
	depthFailing bool
}

var nameRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`) })

// ParseURL splits a bus URL into the NATS server URL(s) and the Options
// its query sets: namespace, partitions. A URL names nats:// (or tls://)
// servers, comma-separated, with credentials in the userinfo.
func ParseURL(raw string) (string, Options, error) {
	var opt Options
	server, query, _ := strings.Cut(raw, "?")
	for _, s := range strings.Split(server, ",") {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil || u.Host == "" {
			return "", opt, fmt.Errorf("bus %s: not a nats://host:port URL", Redact(raw))
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return "", opt, fmt.Errorf("bus %s: the scheme must be nats:// (or tls://, ws://, wss://), not %s://", Redact(raw), u.Scheme)
		}
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", opt, fmt.Errorf("bus %s: %v", Redact(raw), err)
	}
	for k, vs := range q {
		v := vs[len(vs)-1]
		switch k {
		case "namespace":
			if !nameRe().MatchString(v) {
				return "", opt, fmt.Errorf("bus %s: namespace %q: use letters, digits, - and _ (at most 32)", Redact(raw), v)
			}
			opt.Namespace = v
		case "partitions":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 4096 {
				return "", opt, fmt.Errorf("bus %s: partitions %q: a whole number from 1 to 4096", Redact(raw), v)
			}
			opt.Partitions = n
		default:
			return "", opt, fmt.Errorf("bus %s: unknown setting %q (namespace, partitions)", Redact(raw), k)
		}
	}
	return server, opt, nil
}

// Redact is a bus URL fit for logs: a password, or a token in the place
// of the user, replaced by "xxxxx".
func Redact(raw string) string {
	parts := strings.Split(raw, ",")
	for i, p := range parts {
		scheme, rest, ok := strings.Cut(p, "://")
		if !ok {
			continue
		}
		host := rest
		if j := strings.IndexAny(rest, "/?"); j >= 0 {
			host = rest[:j]
		}
		at := strings.LastIndex(host, "@")
		if at < 0 {
			continue
		}
		user, _, hasPass := strings.Cut(host[:at], ":")
		if hasPass {
			user += ":xxxxx"
		} else {
			user = "xxxxx" // a token
		}
		parts[i] = scheme + "://" + user + rest[at:]
	}
	return strings.Join(parts, ",")
}

// Dial connects to the bus URL (see ParseURL) and opens the bus: it
// creates the streams if they are missing. Name identifies this replica
// in the server's connection list.
func Dial(ctx context.Context, rawURL, name string, opt Options) (*Bus, error) {
	server, fromURL, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if opt.Namespace == "" {
		opt.Namespace = fromURL.Namespace
	}
	if opt.Partitions == 0 {
		opt.Partitions = fromURL.Partitions
	}
	timeout := 5 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	nc, err := nats.Connect(server, nats.Name(name), nats.Timeout(timeout), nats.MaxReconnects(-1),
		nats.ReconnectWait(250*time.Millisecond), nats.NoCallbacksAfterClientClose())
	if err != nil {
		return nil, fmt.Errorf("bus %s: %w (is a NATS server with JetStream listening there?)", Redact(rawURL), cleanErr(err))
	}
	b, err := Open(ctx, nc, opt)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("bus %s: %w", Redact(rawURL), err)
	}
	b.ownsConn = true
	b.url = Redact(rawURL)
	return b, nil
}

// cleanErr drops the nats: prefix of the client's errors.
func cleanErr(err error) error { return cleanError{err} }

// cleanError is a client's error without its "nats: " prefix, still
// wrapping it (a context's error stays one for errors.Is).
type cleanError struct{ err error }

func (e cleanError) Error() string { return strings.TrimPrefix(e.err.Error(), "nats: ") }
func (e cleanError) Unwrap() error { return e.err }

// Open opens the bus on a connection the caller keeps (and closes after
// the bus). It sets the connection's reconnect handler.
func Open(ctx context.Context, nc *nats.Conn, opt Options) (*Bus, error) {
	opt.defaults()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	b := &Bus{opt: opt, nc: nc, js: js, done: make(chan struct{}), reconnected: make(chan struct{}), kv: map[string]jetstream.KeyValue{},
		in: strings.ToUpper(opt.Namespace) + "_INBOUND", out: strings.ToUpper(opt.Namespace) + "_OUTBOUND", url: nc.ConnectedUrlRedacted()}
	nc.SetReconnectHandler(func(*nats.Conn) {
		b.mu.Lock()
		close(b.reconnected)
		b.reconnected = make(chan struct{})
		b.mu.Unlock()
	})
	for _, s := range []struct{ name, subj string }{{b.in, opt.Namespace + ".in.*"}, {b.out, opt.Namespace + ".out.*.*"}} {
		st, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
			Name:        s.name,
			Description: "nb gateway messages (" + opt.Namespace + ")",
			Subjects:    []string{s.subj},
			Retention:   jetstream.WorkQueuePolicy,
			Storage:     jetstream.FileStorage,
			Duplicates:  opt.DuplicateWindow,
			Replicas:    opt.StreamReplicas,
		})
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", s.name, cleanErr(err))
		}
		if s.name == b.out {
			b.outStream = st
		}
	}
	return b, nil
}

// Check reports whether the bus is reachable now: connected, and
// JetStream answering.
func (b *Bus) Check(ctx context.Context) error {
	if st := b.nc.Status(); st != nats.CONNECTED {
		return fmt.Errorf("%s: %s", b.url, strings.ToLower(st.String()))
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := b.js.AccountInfo(ctx); err != nil {
		return fmt.Errorf("%s: JetStream does not answer: %w", b.url, cleanErr(err))
	}
	return nil
}

// Fanout are the channels whose outbound messages reach every replica
// (Options.Broadcast).
func (b *Bus) Fanout() []string { return slices.Clone(b.opt.Broadcast) }

// String is the bus's URL, credentials redacted.
func (b *Bus) String() string { return b.url }

// Conn is the bus's connection (for the elections and claims).
func (b *Bus) Conn() *nats.Conn { return b.nc }

func partition(key string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(key)) //nolint:errcheck // never fails
	return int(h.Sum32() % uint32(n))
}

// token makes s a subject token and part of a consumer name.
func token(s string) string {
	ok := true
	for _, r := range s {
		if !(r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			ok = false
			break
		}
	}
	if ok && s != "" && len(s) <= 32 {
		return s
	}
	h := fnv.New64a()
	h.Write([]byte(s)) //nolint:errcheck // never fails
	return fmt.Sprintf("x%x", h.Sum64())
}

func (b *Bus) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// PublishInbound implements bus.Bus.
func (b *Bus) PublishInbound(ctx context.Context, m bus.Inbound) (bool, error) {
	if b.isClosed() {
		return false, bus.ErrClosed
	}
	data, err := json.Marshal(m)
	if err != nil {
		return false, err
	}
	subj := fmt.Sprintf("%s.in.%d", b.opt.Namespace, partition(m.SessionKey(), b.opt.Partitions))
	var opts []jetstream.PublishOpt
	if m.ID != "" {
		opts = append(opts, jetstream.WithMsgID(m.Channel+":"+m.ID))
	}
	ack, err := b.js.Publish(ctx, subj, data, append(opts, jetstream.WithExpectStream(b.in))...)
	if err != nil {
		return false, fmt.Errorf("queue the message: %w", cleanErr(err))
	}
	return ack.Duplicate, nil
}

// PublishOutbound implements bus.Bus.
func (b *Bus) PublishOutbound(ctx context.Context, m bus.Outbound) error {
	if b.isClosed() {
		return bus.ErrClosed
	}
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if slices.Contains(b.opt.Broadcast, m.Channel) {
		if err := b.nc.Publish(b.opt.Namespace+".bcast."+token(m.Channel), data); err != nil {
			return fmt.Errorf("queue the reply: %w", cleanErr(err))
		}
		return nil
	}
	subj := fmt.Sprintf("%s.out.%s.%d", b.opt.Namespace, token(m.Channel), partition(m.ChatID, b.opt.Partitions))
	opts := []jetstream.PublishOpt{jetstream.WithExpectStream(b.out)}
	if k, ok := bus.FinalKey(m); ok {
		opts = append(opts, jetstream.WithMsgID(strings.ReplaceAll(k, "\x00", ":")))
	}
	if _, err := b.js.Publish(ctx, subj, data, opts...); err != nil {
		return fmt.Errorf("queue the reply: %w", cleanErr(err))
	}
	return nil
}

// Inbound implements bus.Bus: one loop per partition.
func (b *Bus) Inbound(ctx context.Context, fn func(context.Context, bus.Inbound) error) error {
	return b.consumeAll(ctx, b.in, "in", b.opt.Namespace+".in.", func(ctx context.Context, data []byte) error {
		var m bus.Inbound
		if err := json.Unmarshal(data, &m); err != nil {
			return errUndecodable{err}
		}
		return fn(ctx, m)
	})
}

// Outbound implements bus.Bus.
func (b *Bus) Outbound(ctx context.Context, channel string, fn func(context.Context, bus.Outbound) error) error {
	decode := func(ctx context.Context, data []byte) error {
		var m bus.Outbound
		if err := json.Unmarshal(data, &m); err != nil {
			return errUndecodable{err}
		}
		return fn(ctx, m)
	}
	if slices.Contains(b.opt.Broadcast, channel) {
		return b.broadcast(ctx, channel, decode)
	}
	tok := token(channel)
	return b.consumeAll(ctx, b.out, "out-"+tok, b.opt.Namespace+".out."+tok+".", decode)
}

type errUndecodable struct{ err error }

func (e errUndecodable) Error() string { return "undecodable message: " + e.err.Error() }

// broadcast delivers the channel's messages published while it runs, in
// order, at most once.
func (b *Bus) broadcast(ctx context.Context, channel string, fn func(context.Context, []byte) error) error {
	if err := b.start(); err != nil {
		return err
	}
	defer b.running.Done()
	ch := make(chan *nats.Msg, 1024)
	sub, err := b.nc.ChanSubscribe(b.opt.Namespace+".bcast."+token(channel), ch)
	if err != nil {
		return fmt.Errorf("subscribe to %s: %w", channel, cleanErr(err))
	}
	defer sub.Unsubscribe() //nolint:errcheck // closing anyway
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-b.done:
			return nil
		case m := <-ch:
			if err := fn(ctx, m.Data); err != nil {
				var u errUndecodable
				if errors.As(err, &u) {
					b.opt.Log.Error("bus: "+err.Error(), "channel", channel)
				}
			}
		}
	}
}

// start counts a running consumer, unless the bus is closed.
func (b *Bus) start() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return bus.ErrClosed
	}
	b.running.Add(1)
	return nil
}

// consumeAll runs a loop per partition until ctx ends or the bus closes.
func (b *Bus) consumeAll(ctx context.Context, stream, prefix, subject string, fn func(context.Context, []byte) error) error {
	if err := b.start(); err != nil {
		return err
	}
	defer b.running.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-b.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	errs := make([]error, b.opt.Partitions)
	var wg sync.WaitGroup
	for p := range b.opt.Partitions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[p] = b.consume(ctx, stream, fmt.Sprintf("%s-%s-%d", b.opt.Namespace, prefix, p), fmt.Sprintf("%s%d", subject, p), fn)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// consume runs one partition's consumer: one message at a time (the
// server's MaxAckPending 1), acknowledged after fn returns nil.
//
// The consumer keeps its state in memory: with work-queue retention an
// acknowledged message leaves the stream, so the stream itself is the
// record of what is left to do, and a consumer lost with a restart of
// the server is created again here, from the first message left. (File
// storage would write each consumer's state to disk after every
// acknowledgement: most of the server's work at this rate.)
func (b *Bus) consume(ctx context.Context, stream, name, subject string, fn func(context.Context, []byte) error) error {
	wait := b.opt.Retry
	for ctx.Err() == nil {
		b.mu.Lock()
		reconnected := b.reconnected
		b.mu.Unlock()
		cons, err := b.js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{
			Durable:       name,
			FilterSubject: subject,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       b.opt.AckWait,
			MaxAckPending: 1,
			MaxDeliver:    -1,
			DeliverPolicy: jetstream.DeliverAllPolicy,
			Replicas:      b.opt.StreamReplicas,
			MemoryStorage: true,
		})
		var it jetstream.MessagesContext
		if err == nil {
			it, err = cons.Messages(jetstream.PullMaxMessages(64), jetstream.WithMessagesErrOnMissingHeartbeat(true))
		}
		if err != nil {
			if ctx.Err() == nil {
				b.opt.Log.Warn("bus: consumer "+name+": "+cleanErr(err).Error()+"; trying again", "in", wait)
			}
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
			wait = min(wait*2, 5*time.Second)
			continue
		}
		wait = b.opt.Retry
		itCtx, stop := context.WithCancel(ctx)
		go func() {
			select {
			case <-reconnected:
				stop()
			case <-itCtx.Done():
			}
		}()
		for {
			msg, err := it.Next(jetstream.NextContext(itCtx))
			if err != nil {
				if ctx.Err() == nil {
					b.opt.Log.Debug("bus: consumer " + name + ": " + cleanErr(err).Error() + "; opening it again")
				}
				break
			}
			b.handle(ctx, msg, fn)
		}
		stop()
		// Hand back what the client holds, so it goes to another
		// replica now rather than after AckWait.
		it.Drain()
		for {
			msg, err := it.Next(jetstream.NextMaxWait(100 * time.Millisecond))
			if err != nil {
				break
			}
			msg.Nak() //nolint:errcheck // redelivered after AckWait anyway
		}
	}
	return nil
}

// handle runs fn on one message, telling the server it is in progress
// while it runs.
func (b *Bus) handle(ctx context.Context, msg jetstream.Msg, fn func(context.Context, []byte) error) {
	// A timer, not a goroutine: most handlers return long before the
	// first beat is due.
	var mu sync.Mutex
	stopped := false
	var beat *time.Timer
	mu.Lock() // the callback reads beat
	beat = time.AfterFunc(b.opt.AckWait/3, func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			msg.InProgress() //nolint:errcheck // a lost one costs a redelivery
			beat.Reset(b.opt.AckWait / 3)
		}
	})
	mu.Unlock()
	err := fn(ctx, msg.Data())
	mu.Lock()
	stopped = true
	beat.Stop()
	mu.Unlock()
	var u errUndecodable
	switch {
	case err == nil:
		msg.Ack() //nolint:errcheck // a lost ack is a redelivery, which the ids make harmless
	case errors.As(err, &u):
		b.opt.Log.Error("bus: dropping "+err.Error(), "subject", msg.Subject())
		msg.Term() //nolint:errcheck // same
	case ctx.Err() != nil:
		msg.Nak() //nolint:errcheck // same
	default:
		n := uint64(1)
		if md, err := msg.Metadata(); err == nil {
			n = md.NumDelivered
		}
		wait := b.opt.Retry << min(n-1, 5)
		msg.NakWithDelay(min(wait, 30*b.opt.Retry)) //nolint:errcheck // same
	}
}

// Close implements bus.Bus: consumers return (their handlers' contexts
// are cancelled), publishing fails, and Close waits for them.
func (b *Bus) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	close(b.done)
	b.mu.Unlock()
	b.running.Wait()
	if b.ownsConn {
		return b.nc.Drain()
	}
	return nil
}

var _ bus.Bus = (*Bus)(nil)
