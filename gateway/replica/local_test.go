package replica_test

import (
	"testing"

	"github.com/nbots/nb/gateway/replica"
	"github.com/nbots/nb/gateway/replica/replicatest"
)

// Local is one process: one replica, its elections always won.
func TestLocalConformance(t *testing.T) {
	replicatest.Run(t, func(t *testing.T, n int) []replicatest.Replica {
		l := &replica.Local{}
		return []replicatest.Replica{{Elector: l, Claims: l}}
	})
}
