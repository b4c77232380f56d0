// Package rungroup runs the parts of a long-running program together
// (a gateway's loop, its channels and listener; nb serve's listeners
// and watchers): the first part to fail cancels the others' context and
// is what Wait returns, named; a part that ends without failing leaves
// the others running; Wait returns once every part has returned, so
// nothing a group started outlives it.
package rungroup

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"
)

// Group is a set of parts that run together.
type Group struct {
	g   *errgroup.Group
	ctx context.Context
}

// New is a Group whose parts run until ctx ends or one fails.
func New(ctx context.Context) *Group {
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
