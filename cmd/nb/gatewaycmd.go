package main

import (
	"context"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cmd/nb/gatewaycmd"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/state/storeurl"
)

// isGatewayCommand tells nb gateway from a cartridge named gateway.
func isGatewayCommand(args []string) bool {
	if len(args) == 0 || args[0] != "gateway" {
		return false
	}
	if len(args) >= 3 {
		switch args[2] {
		case "eval", "repl", "state", "cartridge", "mcp":
			return false
		}
	}
	return true
}

// gatewayCommand runs nb gateway ... with SIGINT and SIGTERM as its stop.
func (a *App) gatewayCommand(args []string) int {
	return gatewaycmd.Main(a.context(), args, a.gatewayProcess())
}

// gatewayProcess is what nb gateway takes from this process: its
// environment and streams, cmd/nb's flag sets and bot host, the store
// options of the environment, and what --yes and --allow-tool approved.
func (a *App) gatewayProcess() gatewaycmd.Process {
	p := gatewaycmd.Process{
		Environ: a.Environ, Stdout: a.Stdout, Stderr: a.Stderr, Flags: a.flags, Approval: a.approve.Clone(), Restart: a.reexec, Version: Version,
		Host: func(st state.Store, requireSandbox bool) bot.Host {
			a.requireSandbox = requireSandbox
			h := a.host()
			h.Store = st
			return h
		},
		OpenStore: func(ctx context.Context, url string) (*storeurl.Store, error) {
			if err := a.openStore(ctx, url); err != nil {
				return nil, err
			}
			s := a.store
			a.store = nil // the gateway's command closes it
			return s, nil
		},
	}
	if a.Stdin != nil {
		p.Stdin = a.Stdin
	}
	return p
}
