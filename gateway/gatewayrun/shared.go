package gatewayrun

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/nbots/nb/gateway/access"
	"github.com/nbots/nb/gateway/bus/jetstream"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/replica"
)

// What nb gateway keeps in its state folder (XDG_STATE_HOME) is shared
// through the bus when replicas run on several machines (issue 24): the
// channels' receive positions in the bucket <namespace>_positions and the
// pairing codes and approvals in <namespace>_pairing. Alone (no --bus),
// they stay the state folder's files.

// share opens the shared positions and pairing book when the gateway
// runs on a bus, importing the approvals of this replica's file.
func (gw *Gateway) share(ctx context.Context) error {
	sc := gw.replicas
	if sc == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var err error
	if sc.positions, err = sc.bus.Positions(ctx, sc.id); err != nil {
		return fmt.Errorf("bus %s: receive positions: %w", sc.bus, err)
	}
	pairings, err := SharedPairings(ctx, sc.bus, gw.State.Pairing, gw.log.Info)
	if err != nil {
		return err
	}
	gw.Access.Pairings = pairings
	return nil
}

// SharedPairings opens the bus's pairing book, into which the approvals
// (and waiting codes) of the file at path go first: a gateway moving to
// the bus keeps its paired senders. An approval already there is not
// added again, so importing is done once whatever the restarts.
func SharedPairings(ctx context.Context, b *jetstream.Bus, path string, info func(string, ...any)) (*jetstream.Pairings, error) {
	p, err := b.Pairings(ctx)
	if err != nil {
		return nil, fmt.Errorf("bus %s: pairing store: %w", b, err)
	}
	file := (&access.FilePairings{Path: path}).Read()
	now := time.Now()
	file.Pending = slices.DeleteFunc(slices.Clone(file.Pending), func(p access.Pending) bool { return !now.Before(p.Expires) })
	if len(file.Approved)+len(file.Pending) == 0 {
		return p, nil
	}
	n := 0
	if _, err := p.Update(ctx, func(book *access.Book) { n = book.Merge(file) }); err != nil {
		return nil, fmt.Errorf("bus %s: pairing store: importing %s: %w", b, path, err)
	}
	if n > 0 {
		info("pairing: approvals imported from this replica's file into the bus; the file is no longer read", "approvals", n, "file", path, "store", p.String())
	}
	return p, nil
}

// sharedPosition is channel.Env.OpenPosition on the bus for the channel
// name whose section is raw (nil without a bus): the key is the
// position's name and a hash of the channel's account, as its receive
// loop's election.
func (gw *Gateway) sharedPosition(name string, raw json.RawMessage) func(context.Context, string, channel.FileCursor) (channel.Cursor, error) {
	if gw.replicas == nil || gw.replicas.positions == nil {
		return nil
	}
	hash := replica.AccountHash(name, channelAccount(name, raw))
	positions := gw.replicas.positions
	return func(ctx context.Context, position string, file channel.FileCursor) (channel.Cursor, error) {
		return positions.Open(ctx, position+"."+hash, file)
	}
}
