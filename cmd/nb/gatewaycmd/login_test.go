package gatewaycmd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nbots/nb/gateway/channel/whatsapp"
	"github.com/nbots/nb/gateway/channel/whatsapp/native"
)

// TestGatewayChannelsLoginWhatsApp: the command runs `npm start` in
// nanobot's bridge folder with the token the channel uses, nanobot's
// auth folder and the port of bridgeUrl; without a built bridge it says
// how to get one.
func TestGatewayChannelsLoginWhatsApp(t *testing.T) {
	dir, cfg := echoGatewayConfig(t, `{"whatsapp": {"enabled": true, "bridgeUrl": "ws://localhost:3999"}}`)
	bin := filepath.Join(dir, "bin")
	os.MkdirAll(bin, 0o755)
	record := filepath.Join(dir, "npm.txt")
	os.WriteFile(filepath.Join(bin, "npm"), []byte("#!/bin/sh\necho \"$1 $(pwd) $BRIDGE_TOKEN $AUTH_DIR $BRIDGE_PORT\" > "+record+"\n"), 0o755)
	out, err := os.Create(filepath.Join(dir, "out.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	a := &cli{stdout: out, stderr: out, environ: []string{"HOME=" + dir, "PATH=" + bin}}

	err = a.gatewayChannelsCommand(context.Background(), []string{"login", "whatsapp", "--config", cfg})
	if err == nil || !strings.Contains(err.Error(), "npm install && npm run build") {
		t.Fatalf("no bridge: %v", err)
	}
	bridge := filepath.Join(dir, ".nanobot", "bridge")
	os.MkdirAll(filepath.Join(bridge, "dist"), 0o755)
	os.WriteFile(filepath.Join(bridge, "dist", "index.js"), []byte("// bridge"), 0o644)
	if err := a.gatewayChannelsCommand(context.Background(), []string{"login", "whatsapp", "--config", cfg}); err != nil {
		b, _ := os.ReadFile(out.Name())
		t.Fatalf("%v\n%s", err, b)
	}
	got, _ := os.ReadFile(record)
	token, _ := os.ReadFile(whatsapp.TokenPath(filepath.Join(dir, ".nanobot")))
	want := "start " + bridge + " " + string(token) + " " + filepath.Join(dir, ".nanobot", "whatsapp-auth") + " 3999\n"
	if len(token) == 0 || string(got) != want {
		t.Errorf("npm ran as %q, want %q", got, want)
	}
	if err := a.gatewayChannelsCommand(context.Background(), []string{"login", "telegram", "--config", cfg}); err == nil {
		t.Error("login telegram accepted")
	}
}

// With channels.whatsapp.native, login does not look for nanobot's
// bridge: an nb built without whatsmeow says which tag builds it, one
// built with it opens the device store in the state folder.
func TestGatewayChannelsLoginWhatsAppNative(t *testing.T) {
	dir, cfg := echoGatewayConfig(t, `{"whatsapp": {"enabled": true, "native": true}}`)
	var out strings.Builder
	a := &cli{stdout: &out, stderr: &out, environ: []string{"HOME=" + dir, "XDG_STATE_HOME=" + filepath.Join(dir, "state")}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a build with the tag stops before connecting to WhatsApp
	err := a.gatewayChannelsCommand(ctx, []string{"login", "whatsapp", "--config", cfg})
	if err != nil && strings.Contains(err.Error(), "npm") {
		t.Fatalf("native login looked for the bridge: %v", err)
	}
	if !native.Built {
		if err == nil || !strings.Contains(err.Error(), "-tags whatsmeow") {
			t.Errorf("native login without the tag: %v", err)
		}
		return
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "state", "nb", "gateway", "channels-*", native.StoreFile))
	if len(matches) != 1 {
		t.Errorf("device store not in the state folder: %v (err %v)\n%s", matches, err, out.String())
	}
}
