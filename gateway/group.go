package gateway

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"
)

// Group runs the parts of a gateway (its loop, the dispatcher, each
// channel, the background tasks, the listener) together: the first part
// to fail cancels the others' context and is what Wait returns, named;
// a part that ends without failing leaves the others running. Wait
// returns once every part has returned.
type Group struct {
	g   *errgroup.Group
	ctx context.Context
}

// NewGroup is a Group whose parts run until ctx ends or one fails.
func NewGroup(ctx context.Context) *Group {
	g, ctx := errgroup.WithContext(ctx)
	return &Group{g: g, ctx: ctx}
}

// Context ends when the group's context ends or a part fails.
func (r *Group) Context() context.Context { return r.ctx }

// Go runs the part named part. What it returns once the group is
// stopping (its context's error, most often) is not a failure.
func (r *Group) Go(part string, fn func(context.Context) error) {
	r.g.Go(func() error {
		if err := fn(r.ctx); err != nil && r.ctx.Err() == nil {
			return fmt.Errorf("%s: %w", part, err)
		}
		return nil
	})
}

// Wait waits for every part and returns the first failure.
func (r *Group) Wait() error { return r.g.Wait() }
