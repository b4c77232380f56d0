package rungroup_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	"github.com/nbots/nb/internal/rungroup"
)

// The first failure cancels the others and is returned, named; what the
// others return while stopping is not a failure; Wait returns once every
// part has.
func TestFirstFailureStopsAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := rungroup.New(t.Context())
		stopped := make(chan string, 2)
		for _, name := range []string{"listener", "watcher"} {
			g.Go(name, func(ctx context.Context) error {
				<-ctx.Done()
				stopped <- name
				return ctx.Err()
			})
		}
		g.Go("store", func(context.Context) error { return errors.New("connection refused") })
		err := g.Wait()
		if err == nil || err.Error() != "store: connection refused" {
			t.Fatalf("Wait: %v, want the store's failure, named", err)
		}
		if len(stopped) != 2 {
			t.Fatalf("%d parts had returned when Wait did, want 2", len(stopped))
		}
	})
}

// A part that ends without failing leaves the others running; the
// group ends with its context, without a failure.
func TestEndWithoutFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		g := rungroup.New(ctx)
		g.Go("once", func(context.Context) error { return nil })
		running := make(chan struct{})
		g.Go("server", func(ctx context.Context) error {
			close(running)
			<-ctx.Done()
			return errors.New("closed: " + context.Cause(ctx).Error())
		})
		<-running
		synctest.Wait()
		if g.Context().Err() != nil {
			t.Fatal("a part that ended without failing stopped the group")
		}
		cancel()
		if err := g.Wait(); err != nil {
			t.Fatalf("Wait after the context ended: %v, want nil", err)
		}
	})
}
