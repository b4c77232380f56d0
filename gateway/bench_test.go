package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/gateway/access"
	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/session"
	_ "github.com/nbots/nb/provider/openai"
	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

// BenchmarkTurn measures one turn of the gateway on the real runtime
// against an instant fake model: authorisation, session lock, prompt,
// the exchange, fsync, the reply queued.
func BenchmarkTurn(b *testing.B) {
	model := openaitest.New(func(t providertest.Turn) providertest.Reply {
		return providertest.Reply{Chunks: []string{"echo: ", t.LastUser()}}
	})
	model.SplitBytes = 1 << 20 // one write per frame: an instant model
	fake := httptest.NewServer(model)
	defer fake.Close()
	src := fmt.Sprintf("provider: {id: openai, credentials: {address: %q, access-token: k}, settings: {model: m}}\nsafety: {tools: {confirmable: false}}\n", fake.URL)
	cart, err := cartridge.Parse([]byte(src), "", cartridge.FormatYAML, nil)
	if err != nil {
		b.Fatal(err)
	}
	bt, err := bot.New(context.Background(), cart, bot.Host{})
	if err != nil {
		b.Fatal(err)
	}
	defer bt.Close()
	dir := b.TempDir()
	sm, _ := session.NewManager(dir + "/sessions")
	defer sm.Close()
	bs := bus.NewLocal()
	defer bs.Close()
	g := &Gateway{Bus: bs, Sessions: sm, Runner: BotRunner{Bot: bt}, Prompt: &Prompt{Workspace: dir},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Access: &access.Checker{Pairings: &access.FilePairings{}}}
	g.Alone()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go bs.Outbound(ctx, "web", func(context.Context, bus.Outbound) error { return nil })
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		if _, err := g.turn(ctx, Direct{SessionKey: fmt.Sprintf("web:%d", i%100), Channel: "web", ChatID: fmt.Sprint(i % 100), Content: "hi", Deliver: true}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "MB-live-heap")
}
