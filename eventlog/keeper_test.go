package eventlog_test

import (
	"testing"

	"github.com/nbots/nb/eventlog"
	"github.com/nbots/nb/eventlog/keepertest"
)

// The keeper in memory passes the backends' conformance suite
// (eventlog/pglog runs it on PostgreSQL).
func TestKeeperConformance(t *testing.T) {
	keepertest.Run(t, func(*testing.T) eventlog.Shared { return nil })
}
