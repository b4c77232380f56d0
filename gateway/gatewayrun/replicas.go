package gatewayrun

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nbots/nb/gateway/bus/jetstream"
	"github.com/nbots/nb/gateway/cron"
)

// Replicas are what the replicas of one gateway share (issue 24): the
// bus on NATS JetStream, the elections of receive loops, cron and the
// heartbeat, the claims of their slots, the record of delivered replies,
// the budgets' counts and steering. JoinReplicas opens them; Options.Replicas
// nil is one gateway alone, in process.
type Replicas struct {
	id        string
	bus       *jetstream.Bus
	elector   *jetstream.Elector
	claims    *jetstream.Claims
	delivered *jetstream.Delivered
	counters  *jetstream.Counters
	steering  *jetstream.Steering
	positions *jetstream.Positions // the receive positions (shared.go)
	// namespace is the bus URL's namespace (its sessions' in a store).
	namespace string
}

// JoinReplicas connects to the bus at raw (nats://…) as a new replica;
// "" is nil (one gateway alone, in process). A bus that cannot be
// reached at start is an error naming it, credentials redacted; after
// the start, the client reconnects by itself and /ready says while it
// cannot. Close disconnects.
func JoinReplicas(ctx context.Context, raw string, log *slog.Logger) (*Replicas, error) {
	if raw == "" {
		return nil, nil
	}
	host, _ := os.Hostname()
	var r [4]byte
	rand.Read(r[:]) //nolint:errcheck // never fails
	id := fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(r[:]))
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b, err := jetstream.Dial(dctx, raw, "nb gateway "+id, jetstream.Options{Log: log})
	if err != nil {
		return nil, err
	}
	sc := &Replicas{id: id, bus: b, namespace: Namespace(raw)}
	if sc.elector, err = b.Elector(dctx, id, 0); err == nil {
		if sc.claims, err = b.Claims(dctx, id); err == nil {
			if sc.delivered, err = b.Delivered(dctx); err == nil {
				if sc.counters, err = b.Counters(dctx, "budget"); err == nil {
					sc.steering, err = b.Steering(dctx)
				}
			}
		}
	}
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("bus %s: %w", jetstream.Redact(raw), err)
	}
	log.Info("bus", "url", jetstream.Redact(raw), "replica", id)
	return sc, nil
}

// Close disconnects from the bus.
func (r *Replicas) Close() { r.bus.Close() }

// String is the bus's URL, credentials redacted.
func (r *Replicas) String() string { return r.bus.String() }

// Namespace is the namespace of a bus URL (default nb); it names the
// gateway's sessions in a store too.
func Namespace(raw string) string {
	if raw == "" {
		return "nb"
	}
	_, o, err := jetstream.ParseURL(raw)
	if err != nil || o.Namespace == "" {
		return "nb"
	}
	return o.Namespace
}

// leadOrRun runs fn under the election of key (at once, alone).
func (gw *Gateway) leadOrRun(ctx context.Context, key string, fn func(context.Context) error) error {
	return gw.Core.Elector.Lead(ctx, key, fn, nil)
}

// runScheduler runs the cron scheduler; with replicas, on the elected
// one, waiting out the file lock of a leader that is stepping down.
func (gw *Gateway) runScheduler(ctx context.Context, sched *cron.Scheduler) error {
	return gw.leadOrRun(ctx, "cron", func(ctx context.Context) error {
		for {
			err := sched.Run(ctx)
			if !errors.Is(err, cron.ErrRunning) {
				return err
			}
			if gw.replicas == nil {
				gw.log.Warn("cron: " + err.Error() + ": this gateway runs none")
				return nil
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
		}
	})
}

// identityKeys are the keys of a channel's section that name its
// account on the platform (a Telegram bot's token, a mailbox).
var identityKeys = []string{"token", "botToken", "appToken", "accessToken", "userId", "homeserver", "imapHost", "imapUsername", "clientId", "appId"}

// channelAccount identifies the account of channels.<name> for the
// election of its receive loop (hashed before it leaves the process).
func channelAccount(name string, raw json.RawMessage) string {
	var section map[string]any
	if json.Unmarshal(raw, &section) != nil {
		return name + "\x00" + string(raw)
	}
	var parts []string
	for _, k := range identityKeys {
		if v, ok := section[k]; ok {
			parts = append(parts, fmt.Sprintf("%s=%v", k, v))
		}
	}
	if len(parts) == 0 {
		return name + "\x00" + string(raw)
	}
	slices.Sort(parts)
	return name + "\x00" + strings.Join(parts, "\x00")
}
