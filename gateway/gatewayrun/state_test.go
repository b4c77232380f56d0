package gatewayrun

import (
	"path/filepath"
	"testing"
)

// TestGatewayStateFiles: the state files of a workspace are named once,
// after it, in the state folder (the names gateways already wrote keep
// being found: pairing-, usage-, channels- and the same 12 hex digits).
func TestGatewayStateFiles(t *testing.T) {
	dir := filepath.FromSlash("/state/nb/gateway")
	st := StateFiles(dir, "/home/me/ws")
	const id = "465a27253ecc" // sha256("/home/me/ws")[:6]
	want := Files{
		Dir:      filepath.FromSlash("/state/nb/gateway"),
		Pairing:  filepath.FromSlash("/state/nb/gateway/pairing-" + id + ".json"),
		Usage:    filepath.FromSlash("/state/nb/gateway/usage-" + id + ".json"),
		Channels: filepath.FromSlash("/state/nb/gateway/channels-" + id),
		Status:   filepath.FromSlash("/state/nb/gateway/channels-" + id + "/status.json"),
		Lock:     filepath.FromSlash("/state/nb/gateway/gateway-" + id + ".lock"),

		PipelineGates: filepath.FromSlash("/state/nb/gateway/pipeline-gates-" + id),
		WebGates:      filepath.FromSlash("/state/nb/gateway/web-gates-" + id),
	}
	if st != want {
		t.Errorf("StateFiles = %+v, want %+v", st, want)
	}
	if other := StateFiles(dir, "/home/me/ws2"); other.Pairing == st.Pairing {
		t.Error("two workspaces share a pairing store")
	}
}
