package session_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/session"
	"github.com/nbots/nb/internal/pgtest"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/state/pgstore"
)

// BenchmarkSessionTurn measures what a gateway turn costs its session,
// on nanobot's files (on this machine's disk) and on PostgreSQL (a
// durable cluster: fsync on, as in production), side by side in one run:
//
//	go test ./gateway/session -run '^$' -bench SessionTurn -benchtime 1000x
//
// One turn is what gateway.turn does with its session: Lock (the file
// lock and a reread when the file changed; the store's lease and the
// history read with it), the user's message, a tool call and its result
// and the answer appended (one Append, as the agent records a round),
// Sync, unlock. Turns go round 20 sessions that start with 100 messages
// each (a session of a few days), then round 4 sessions of 1,000 (the
// store reads a session's whole history at each Lock). p50 and p99 are
// reported per backend, and the p50 of the differences of turns run
// side by side.
func BenchmarkSessionTurn(b *testing.B) {
	dbURL := pgtest.Durable(b)
	ctx := context.Background()
	pg, err := pgstore.Open(ctx, dbURL, pgstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer pg.Close()
	dir, err := os.MkdirTemp("", "nb-bench-sessions-") // on disk, not in memory
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	files, err := session.NewManager(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer files.Close()
	stored, err := session.NewStoreManager(pg, session.Bot("bench"))
	if err != nil {
		b.Fatal(err)
	}
	managers := []*session.Manager{files, stored}
	names := []string{"files", "postgres"}
	q := "What is the weather like in Zürich today? And tomorrow?"
	round := []state.Event{
		{Who: state.RoleUser, Message: q, Input: &q},
		{Who: state.RoleAI, ToolCalls: []state.ToolCall{{ID: "call_1", Name: "web_search", Arguments: `{"query":"weather Zürich"}`}}},
		{Who: state.RoleTool, Message: "Zürich: sunny, 21 °C; tomorrow rain, 15 °C.", Result: state.ToolResult{ID: "call_1", Name: "web_search"}},
		{Who: state.RoleAI, Message: "Sunny, 21 °C today; rain and 15 °C tomorrow."},
	}
	turn := func(m *session.Manager, key string) error {
		s, err := m.Get(ctx, key)
		if err != nil {
			return err
		}
		unlock, err := s.Lock(ctx)
		if err != nil {
			return err
		}
		defer unlock()
		if err := s.Append(ctx, round...); err != nil {
			return err
		}
		return s.Sync()
	}
	for _, size := range []struct{ sessions, messages int }{{20, 100}, {4, 1000}} {
		b.Run(fmt.Sprintf("history=%d", size.messages), func(b *testing.B) {
			key := func(i int) string { return fmt.Sprintf("telegram:%d-%d", size.messages, i%size.sessions) }
			for _, m := range managers {
				for i := range size.sessions {
					for range size.messages / len(round) {
						if err := turn(m, key(i)); err != nil {
							b.Fatal(err)
						}
					}
				}
			}
			times := make([][]time.Duration, len(managers))
			b.ResetTimer()
			for n := range b.N {
				for i, m := range managers {
					start := time.Now()
					if err := turn(m, key(n)); err != nil {
						b.Fatal(err)
					}
					times[i] = append(times[i], time.Since(start))
				}
			}
			b.StopTimer()
			for i, ts := range times {
				b.ReportMetric(float64(percentile(ts, 50))/1e6, names[i]+"-p50-ms")
				b.ReportMetric(float64(percentile(ts, 99))/1e6, names[i]+"-p99-ms")
			}
			diff := make([]time.Duration, len(times[0]))
			for j := range diff {
				diff[j] = times[1][j] - times[0][j]
			}
			b.ReportMetric(float64(percentile(diff, 50))/1e6, "overhead-p50-ms")
		})
	}
}

// percentile returns the p-th percentile of ts (sorting a copy).
func percentile(ts []time.Duration, p int) time.Duration {
	s := slices.Clone(ts)
	slices.Sort(s)
	return s[min(len(s)*p/100, len(s)-1)]
}
