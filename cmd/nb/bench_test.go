package main

import (
	"fmt"
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
	dir := b.TempDir()
	cart, devnull := benchSetup(b, dir)
	b.ReportAllocs()
	for b.Loop() {
		app := &App{Args: []string{cart, "-", "eval", "hi"}, Stdin: devnull, Stdout: devnull, Stderr: devnull, Environ: os.Environ()}
		if code := app.Run(); code != 0 {
			b.Fatal("exit", code)
		}
	}
}

// BenchmarkEvalStateful measures one `nb CART K eval hi` inside the
// process on a stored conversation of 100 exchanges: the store's part of
// an exchange (lock, read, two appends, listing nothing). Each run starts
// from a copy of the same conversation (the copy is not timed).
func BenchmarkEvalStateful(b *testing.B) {
	dir := b.TempDir()
	cart, devnull := benchSetup(b, dir)
	run := func(root, input string) {
		app := &App{Args: []string{cart, "K", "eval", input}, Stdin: devnull, Stdout: devnull, Stderr: devnull, Environ: append(os.Environ(), "NANO_BOTS_STATE_PATH="+root)}
		if code := app.Run(); code != 0 {
			b.Fatal("exit", code)
		}
	}
	seed := filepath.Join(dir, "seed")
	for i := range 100 {
		run(seed, fmt.Sprint("question ", i))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		b.StopTimer()
		i++
		root := filepath.Join(dir, fmt.Sprint("run", i))
		if err := os.CopyFS(root, os.DirFS(seed)); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		run(root, "hi")
	}
}

// benchSetup starts an instant local provider and writes a cartridge for
// it in dir; devnull takes the output.
func benchSetup(b *testing.B, dir string) (cart string, devnull *os.File) {
	srv := httptest.NewServer(openaitest.New(func(providertest.Turn) providertest.Reply {
		return providertest.Reply{Chunks: []string{"Hello!"}}
	}))
	b.Cleanup(srv.Close)
	cart = filepath.Join(dir, "bot.yml")
	os.WriteFile(cart, []byte("meta: {name: Bench, author: nb}\nbehaviors: {interaction: {directive: Be fast.}}\nprovider: {id: openai, credentials: {address: "+srv.URL+"}, settings: {model: m}}\n"), 0o644)
	devnull, _ = os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	b.Cleanup(func() { devnull.Close() })
	return cart, devnull
}
