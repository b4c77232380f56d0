package gatewayrun

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"time"

	"github.com/nbots/nb/gateway/budget"
	"github.com/nbots/nb/gateway/config"
)

// Files are the gateway's own files for one workspace, in its state
// folder outside the workspace (which the assistant's tools can write),
// each named after the workspace.
type Files struct {
	Dir      string // the state folder ($XDG_STATE_HOME/nb/gateway)
	Pairing  string // the pairing codes and approvals
	Usage    string // the budgets' ledger
	Channels string // the folder of the channels' receive positions
	Status   string // the running gateway's channel states (gateway.KeepStatus)
	Lock     string // the running gateway's hold on the workspace (AcquireLock)
	// PipelineGates is the folder of the receive positions of nb
	// pipeline's chat gates, apart from the gateway's own.
	PipelineGates string
	// WebGates is the folder where nb pipeline's gates asked in the web
	// chat meet the running gateway (gateway/webgate).
	WebGates string
}

// StateFiles derives the state files of workspace in the state folder
// dir: the one place their names are made.
func StateFiles(dir, workspace string) Files {
	sum := sha256.Sum256([]byte(workspace))
	id := hex.EncodeToString(sum[:6])
	channels := filepath.Join(dir, "channels-"+id)
	return Files{
		Dir:      dir,
		Pairing:  filepath.Join(dir, "pairing-"+id+".json"),
		Usage:    filepath.Join(dir, "usage-"+id+".json"),
		Channels: channels,
		Status:   filepath.Join(channels, "status.json"),
		Lock:     filepath.Join(dir, "gateway-"+id+".lock"),

		PipelineGates: filepath.Join(dir, "pipeline-gates-"+id),
		WebGates:      filepath.Join(dir, "web-gates-"+id),
	}
}

// Zone is agents.defaults.timezone, UTC when unset (nanobot's default).
func Zone(c *config.Config) (*time.Location, error) {
	tz := c.Agents.Defaults.Timezone
	if tz == "" {
		return time.UTC, nil
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("agents.defaults.timezone: unknown time zone %q", tz)
	}
	return loc, nil
}

// Ledger is the budgets' ledger of c, in its state file.
func Ledger(c *config.Config, st Files, zone *time.Location) *budget.Ledger {
	d := c.Agents.Defaults
	return &budget.Ledger{
		Limits: budget.Limits{SessionTokens: d.Budget.SessionTokens, DailyTokens: d.Budget.DailyTokens},
		Path:   st.Usage,
		Zone:   zone,
	}
}
