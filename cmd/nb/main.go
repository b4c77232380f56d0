// Command nb runs Nano Bots cartridges: nb CARTRIDGE STATE-KEY COMMAND.
// It only parses the command line and wires the packages together.
package main

import (
	"os"

	// Providers register themselves with the provider package.
	_ "github.com/nbots/nb/provider/anthropic"
	_ "github.com/nbots/nb/provider/cohere"
	_ "github.com/nbots/nb/provider/google"
	_ "github.com/nbots/nb/provider/maritaca"
	_ "github.com/nbots/nb/provider/mistral"
	_ "github.com/nbots/nb/provider/ollama"
	_ "github.com/nbots/nb/provider/openai"
)

func main() {
	os.Exit(Main())
}

// Main runs nb with the process's arguments and streams, SIGINT and
// SIGTERM handled once for every command (see signals).
func Main() int {
	sigs := watchSignals()
	defer sigs.stop()
	return (&App{
		Args:    os.Args[1:],
		Stdin:   os.Stdin,
		Stdout:  os.Stdout,
		Stderr:  os.Stderr,
		Environ: os.Environ(),
		signals: sigs,
	}).Run()
}
