package pipelinesrv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nbots/nb/internal/pgtest"
	"github.com/nbots/nb/pipeline/handler"
	"github.com/nbots/nb/pipeline/runstore"
	"github.com/nbots/nb/pipeline/runstore/fileruns"
	"github.com/nbots/nb/pipeline/runstore/pgruns"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// BenchmarkStoredAnswer is how long a human gate waits after another
// replica left its answer in the store (Store.Answer) until its Ask
// returns on the replica that runs it: the run held through one store
// handle, answered through another (another pool: another replica), the
// relay between. Reported as ms/answer (the mean).
func BenchmarkStoredAnswer(b *testing.B) {
	b.Run("fileruns", func(b *testing.B) {
		root := b.TempDir()
		holder, err := fileruns.Open(root)
		if err != nil {
			b.Fatal(err)
		}
		other, err := fileruns.Open(root)
		if err != nil {
			b.Fatal(err)
		}
		benchmarkAnswer(b, holder, other)
	})
	b.Run("pgruns", func(b *testing.B) {
		url := pgtest.New(b)
		open := func() runstore.Store {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			s, err := pgruns.Open(ctx, url, pgruns.Options{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(s.Close)
			return s
		}
		benchmarkAnswer(b, open(), open())
	})
}

func benchmarkAnswer(b *testing.B, holder, other runstore.Store) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const id = "0123456789abcdef01234567"
	g, end := relaying(b, ctx, holder, id)
	defer end()
	var total time.Duration
	b.ResetTimer()
	for i := range b.N {
		asked := make(chan error, 1)
		go func() {
			_, err := g.Ask(ctx, handler.Question{Stage: "gate", Text: "Ship it?"})
			asked <- err
		}()
		qid := fmt.Sprintf("gate-%d", i+1)
		for { // as another replica sees it
			data, err := other.Questions(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			if bytes.Contains(data, []byte(`"`+qid+`"`)) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		data, _ := json.Marshal(relayAnswer{QID: qid, Answer: handler.Answer{Value: "yes"}})
		began := time.Now()
		if err := other.Answer(ctx, id, data); err != nil {
			b.Fatal(err)
		}
		if err := <-asked; err != nil {
			b.Fatal(err)
		}
		total += time.Since(began)
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/answer")
}
