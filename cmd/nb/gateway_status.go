package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/nbots/nb/gateway/budget"
	"github.com/nbots/nb/gateway/cron"
	"github.com/nbots/nb/gateway/gatewayrun"
	"github.com/nbots/nb/gateway/memory"
)

// gatewayStatus is nb gateway status: the workspace, today's tokens by
// source against the budgets, the memory files and the cron jobs.
func (a *App) gatewayStatus(_ context.Context, args []string) error {
	fs, f := a.gatewayFlagSet("nb gateway status", "nb gateway status [flags]", "Shows the workspace, today's token use by source and the budgets, memory and cron jobs.")
	if help, err := parseFlags(fs, args); help || err != nil {
		return err
	}
	c, err := a.loadGatewayConfig(f)
	if err != nil {
		return err
	}
	zone, err := gatewayrun.Zone(c)
	if err != nil {
		return err
	}
	r := gatewayrun.Ledger(c, a.gatewayState(c.Workspace), zone).Report("")
	fmt.Fprintf(a.Stdout, "Workspace: %s\n", c.Workspace)
	fmt.Fprintf(a.Stdout, "Tokens today: %s", budget.Thousands(r.TodayTotal))
	if r.Limits.DailyTokens > 0 {
		fmt.Fprintf(a.Stdout, " of %s (resets %s)", budget.Thousands(r.Limits.DailyTokens), r.Resets.Format("15:04 MST"))
	}
	fmt.Fprintln(a.Stdout)
	for _, s := range budget.Sources {
		fmt.Fprintf(a.Stdout, "  %-14s %s\n", s, budget.Thousands(r.Today[s].Total()))
	}
	if r.Limits.SessionTokens > 0 {
		fmt.Fprintf(a.Stdout, "Session budget: %s tokens\n", budget.Thousands(r.Limits.SessionTokens))
	}
	cons := &memory.Consolidator{Workspace: c.Workspace}
	for _, p := range []string{cons.MemoryPath(), cons.HistoryPath()} {
		if fi, err := os.Stat(p); err == nil {
			fmt.Fprintf(a.Stdout, "%s: %d bytes\n", filepath.Base(p), fi.Size())
		} else {
			fmt.Fprintf(a.Stdout, "%s: none\n", filepath.Base(p))
		}
	}
	jobs, err := cron.NewStore(c.Workspace).Load()
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
	if cron.NewStore(c.Workspace).Running() {
		running = "running"
	}
	fmt.Fprintf(a.Stdout, "Cron jobs: %d enabled, %d in all (scheduler %s)\n", enabled, len(jobs.Jobs), running)
	return nil
}
