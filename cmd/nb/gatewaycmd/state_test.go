package gatewaycmd

import (
	"path/filepath"
	"testing"
)

// TestGatewayStateDir: the state folder is $XDG_STATE_HOME/nb/gateway,
// else ~/.local/state/nb/gateway (the files in it:
// gateway/gatewayrun's TestGatewayStateFiles).
func TestGatewayStateDir(t *testing.T) {
	if dir := (&cli{environ: []string{"XDG_STATE_HOME=/state"}}).gatewayStateDir(); dir != filepath.FromSlash("/state/nb/gateway") {
		t.Errorf("with XDG_STATE_HOME: %s", dir)
	}
	home := (&cli{environ: []string{"HOME=/home/me"}}).gatewayState("/w")
	if home.Dir != filepath.FromSlash("/home/me/.local/state/nb/gateway") {
		t.Errorf("without XDG_STATE_HOME: %s", home.Dir)
	}
}
