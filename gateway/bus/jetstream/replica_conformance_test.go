package jetstream_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus/jetstream"
	"github.com/nbots/nb/gateway/replica/replicatest"
	"github.com/nbots/nb/internal/natstest"
)

// Each replica is its own connection to one server, in a namespace of
// its test's own.
func TestReplicaConformance(t *testing.T) {
	s := natstest.Start(t)
	groups := 0
	replicatest.Run(t, func(t *testing.T, n int) []replicatest.Replica {
		groups++
		ns := fmt.Sprint("replicas", groups)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		out := make([]replicatest.Replica, n)
		for i := range out {
			b := dial(t, s.URL(), jetstream.Options{Namespace: ns})
			id := fmt.Sprint("replica-", i)
			e, err := b.Elector(ctx, id, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			c, err := b.Claims(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			k, err := b.Counters(ctx, "budget")
			if err != nil {
				t.Fatal(err)
			}
			out[i] = replicatest.Replica{Elector: e, Claims: c, Counters: k}
		}
		return out
	})
}
