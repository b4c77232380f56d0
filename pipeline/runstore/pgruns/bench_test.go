package pgruns_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/internal/pgtest"
	"github.com/nbots/nb/pipeline"
	"github.com/nbots/nb/pipeline/engine"
	"github.com/nbots/nb/pipeline/runstore"
	"github.com/nbots/nb/pipeline/runstore/pgruns"
)

// BenchmarkLinearStored is the engine's overhead per node beside an
// instant handler when the checkpoint and events go to PostgreSQL (a
// cluster that syncs to the disk, on this machine): 500 nodes, every
// checkpoint a durable commit.
func BenchmarkLinearStored(b *testing.B) {
	const n = 500
	var sb strings.Builder
	sb.WriteString("digraph L {\n  graph [max_node_visits=0]\n  start [shape=Mdiamond]\n  exit [shape=Msquare]\n")
	prev := "start"
	for i := range n {
		id := fmt.Sprintf("n%d", i)
		fmt.Fprintf(&sb, "  %s [prompt=\"step %d\"]\n  %s -> %s\n", id, i, prev, id)
		prev = id
	}
	fmt.Fprintf(&sb, "  %s -> exit\n}\n", prev)
	src := []byte(sb.String())
	g, _, err := pipeline.Load("l.dot", src)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	s, err := pgruns.Open(ctx, pgtest.Durable(b), pgruns.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	reg := engine.NewRegistry()
	ok := engine.HandlerFunc(func(context.Context, *engine.Stage) (engine.Outcome, error) {
		return engine.Outcome{Status: engine.Success, ContextUpdates: map[string]any{"last": "x"}}, nil
	})
	reg.Register("start", ok)
	reg.Register("exit", ok)
	reg.Default = ok
	var perNode time.Duration
	for i := 0; i < b.N; i++ {
		r, err := s.Create(ctx, runstore.Info{ID: fmt.Sprintf("b%d", i), Name: "L", Source: src})
		if err != nil {
			b.Fatal(err)
		}
		began := time.Now()
		res, err := engine.Run(ctx, engine.Config{Graph: g, Source: src, File: "l.dot", LogsRoot: b.TempDir(), Handlers: reg, Stored: r})
		if err != nil || res.Status != engine.Success {
			b.Fatal(err, res)
		}
		perNode += time.Since(began) / (n + 2)
		if err := r.Release(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(perNode.Microseconds())/1000/float64(b.N), "ms/node")
}
