package main

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

// BenchmarkEval measures one `nb CART - eval hi` inside the process
// (everything but process start and package initialisation) against an
// instant local provider.
func BenchmarkEval(b *testing.B) {
	srv := httptest.NewServer(openaitest.New(func(providertest.Turn) providertest.Reply {
		return providertest.Reply{Chunks: []string{"Hello!"}}
	}))
	defer srv.Close()
	dir := b.TempDir()
	cart := filepath.Join(dir, "bot.yml")
	os.WriteFile(cart, []byte("meta: {name: Bench, author: nb}\nbehaviors: {interaction: {directive: Be fast.}}\nprovider: {id: openai, credentials: {address: "+srv.URL+"}, settings: {model: m}}\n"), 0o644)
	devnull, _ := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	defer devnull.Close()
	b.ReportAllocs()
	for b.Loop() {
		app := &App{Args: []string{cart, "-", "eval", "hi"}, Stdin: devnull, Stdout: devnull, Stderr: devnull, Environ: os.Environ()}
		if code := app.Run(); code != 0 {
			b.Fatal("exit", code)
		}
	}
}
