package gateway

import (
	"context"

	"github.com/nbots/nb/internal/rungroup"
)

// Group runs the parts of a gateway (its loop, the dispatcher, each
// channel, the background tasks, the listener) together: see
// rungroup.Group, which nb serve uses too.
type Group = rungroup.Group

// NewGroup is a Group whose parts run until ctx ends or one fails.
func NewGroup(ctx context.Context) *Group { return rungroup.New(ctx) }
