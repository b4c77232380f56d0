package gatewaycmd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nbots/nb/gateway"
	"github.com/nbots/nb/gateway/budget"
	"github.com/nbots/nb/gateway/config"
	"github.com/nbots/nb/gateway/cron"
	"github.com/nbots/nb/gateway/gatewayrun"
	"github.com/nbots/nb/gateway/memory"
)

// gatewayStatus is nb gateway status: the configuration, the workspace,
// the model and its provider, which providers have a key (as nanobot
// status shows them), today's tokens by
// source against the budgets, the memory files and the cron jobs.
func (cl *cli) gatewayStatus(_ context.Context, args []string) error {
	fs, f := cl.gatewayFlagSet("nb gateway status", "nb gateway status [flags]", "Shows the configuration, the workspace, the model, its provider and which providers\nhave a key (as nanobot status), today's token use by source and the budgets,\nmemory, cron jobs and the channels (connected, connecting and why, stopped, disabled).")
	if help, err := fs.ParseOnly(args); help || err != nil {
		return err
	}
	c, err := cl.loadGatewayConfig(f)
	if err != nil {
		return err
	}
	zone, err := gatewayrun.Zone(c)
	if err != nil {
		return err
	}
	r := gatewayrun.Ledger(c, cl.gatewayState(c.Workspace), zone).Report("")
	fmt.Fprintf(cl.stdout, "Config: %s\n", c.Path)
	fmt.Fprintf(cl.stdout, "Workspace: %s\n", c.Workspace)
	cl.providerStatus(c)
	fmt.Fprintf(cl.stdout, "Tokens today: %s", budget.Thousands(r.TodayTotal))
	if r.Limits.DailyTokens > 0 {
		fmt.Fprintf(cl.stdout, " of %s (resets %s)", budget.Thousands(r.Limits.DailyTokens), r.Resets.Format("15:04 MST"))
	}
	fmt.Fprintln(cl.stdout)
	for _, s := range budget.Sources {
		fmt.Fprintf(cl.stdout, "  %-14s %s\n", s, budget.Thousands(r.Today[s].Total()))
	}
	if r.Limits.SessionTokens > 0 {
		fmt.Fprintf(cl.stdout, "Session budget: %s tokens\n", budget.Thousands(r.Limits.SessionTokens))
	}
	cons := &memory.Consolidator{Workspace: c.Workspace}
	for _, p := range []string{cons.MemoryPath(), cons.HistoryPath()} {
		if fi, err := os.Stat(p); err == nil {
			fmt.Fprintf(cl.stdout, "%s: %d bytes\n", filepath.Base(p), fi.Size())
		} else {
			fmt.Fprintf(cl.stdout, "%s: none\n", filepath.Base(p))
		}
	}
	store := cron.NewStore(c.Workspace)
	store.Legacy = c.NanobotCron
	jobs, err := store.Load()
	if err != nil {
		return err
	}
	enabled := 0
	for _, j := range jobs.Jobs {
		if j.Enabled {
			enabled++
		}
	}
	running := "not running"
	if store.Running() {
		running = "running"
	}
	fmt.Fprintf(cl.stdout, "Cron jobs: %d enabled, %d in all (scheduler %s)\n", enabled, len(jobs.Jobs), running)
	return gateway.ChannelReport(cl.stdout, cl.gatewayState(c.Workspace).Status, gatewayrun.ConfiguredChannels(c))
}

// providerStatus prints the model, the provider nanobot would choose for
// it and, as nanobot status does, each provider of its registry: ✓ when
// it has a key (a local one: its apiBase; an OAuth one: always), else
// "not set". A key itself is never shown.
func (cl *cli) providerStatus(c *config.Config) {
	d := c.Agents.Defaults
	if d.Cartridge != "" {
		fmt.Fprintf(cl.stdout, "Cartridge: %s (agents.defaults.cartridge: the model and provider are the cartridge's)\n", d.Cartridge)
		return
	}
	fmt.Fprintf(cl.stdout, "Model: %s\n", d.Model)
	name := c.ProviderName()
	if name == "" {
		name = "none can serve it"
		if _, err := c.Route(); err != nil {
			name += " (" + err.Error() + ")"
		}
	}
	fmt.Fprintf(cl.stdout, "Provider: %s\n", name)
	for _, p := range c.ProviderSetups() {
		state := "not set"
		switch {
		case p.OAuth:
			state = "✓ (OAuth: nb does not support OAuth logins yet)"
		case p.Set && p.Local:
			state = "✓ " + p.Base
		case p.Set:
			state = "✓"
		}
		fmt.Fprintf(cl.stdout, "  %-24s %s\n", p.Name+":", state)
	}
}
