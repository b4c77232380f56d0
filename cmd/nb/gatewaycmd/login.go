package gatewaycmd

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/nbots/nb/gateway"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/whatsapp"
	"github.com/nbots/nb/gateway/channel/whatsapp/native"
	"github.com/nbots/nb/gateway/channels"
	"github.com/nbots/nb/gateway/config"
	"github.com/nbots/nb/gateway/gatewayrun"
)

// gatewayChannelsCommand is nb gateway channels login whatsapp: it runs
// nanobot's WhatsApp bridge in the terminal, as `nanobot channels login`
// does, so that its QR code can be scanned.
func (cl *cli) gatewayChannelsCommand(ctx context.Context, args []string) error {
	fs, f := cl.gatewayFlagSet("nb gateway channels", "nb gateway channels status [flags]\n  nb gateway channels login whatsapp [flags]", "status lists each configured channel of the running gateway: connected,\nconnecting (and why), stopped (it cannot run, and why), standby (another replica\nreceives) or disabled.\nlogin whatsapp runs nanobot's WhatsApp bridge in this terminal to link a phone\n(scan its QR code in WhatsApp under Linked Devices); leave it running for the\ngateway, or stop it with Ctrl-C once linked and start it as a service.\nWith channels.whatsapp.native (an nb built with the whatsmeow tag) it prints\nWhatsApp's QR code itself and keeps the linked device in the gateway's store\n(NB_STORE or gateway.store when PostgreSQL, else the state folder).")
	if err := fs.Parse(args); err != nil {
		return err
	}
	isStatus := fs.NArg() == 1 && fs.Arg(0) == "status"
	if !isStatus && (fs.NArg() != 2 || fs.Arg(0) != "login" || fs.Arg(1) != whatsapp.Name) {
		return &usageError{msg: "nb gateway channels: the commands are `nb gateway channels status` and `nb gateway channels login whatsapp`"}
	}
	c, err := cl.loadGatewayConfig(f)
	if err != nil {
		return err
	}
	if isStatus {
		return gateway.ChannelReport(cl.stdout, cl.gatewayState(c.Workspace).Status, gatewayrun.ConfiguredChannels(c))
	}
	cfg := whatsapp.Config{NanobotDir: gatewayrun.NanobotDir(c.Path, cl.getenv("HOME"))}
	if raw, ok := c.Channels.Each[whatsapp.Name]; ok {
		if err := channels.Decode(raw, &cfg); err != nil {
			return fmt.Errorf("channels.whatsapp: %w", err)
		}
	}
	if cfg.Native {
		return cl.nativeLogin(ctx, c, cfg)
	}
	ch, err := whatsapp.New(cfg, channel.Env{})
	if err != nil {
		return err
	}
	bridge := filepath.Join(cl.getenv("HOME"), ".nanobot", "bridge")
	if _, err := os.Stat(filepath.Join(bridge, "dist", "index.js")); err != nil {
		return fmt.Errorf("nanobot's WhatsApp bridge is not built in %s: install it once with nanobot (`nanobot channels login`), or copy nanobot's bridge/ folder there and run `npm install && npm run build` in it", bridge)
	}
	npm := lookPath("npm", cl.getenv("PATH"))
	if npm == "" {
		return errors.New("npm is not on PATH: the WhatsApp bridge needs Node.js 18 or later")
	}
	env := append(os.Environ()[:0:0], cl.environ...)
	env = append(env, "BRIDGE_TOKEN="+ch.Token(), "AUTH_DIR="+filepath.Join(cfg.NanobotDir, "whatsapp-auth"))
	if u, err := url.Parse(cfg.BridgeURL); err == nil && u.Port() != "" {
		env = append(env, "BRIDGE_PORT="+u.Port())
	}
	cmd := exec.CommandContext(ctx, npm, "start")
	cmd.Dir, cmd.Env = bridge, env
	cmd.Stdout, cmd.Stderr = cl.stdout, cl.stderr
	if cl.stdin != nil {
		cmd.Stdin = cl.stdin
	}
	fmt.Fprintf(cl.stderr, "nb: starting the WhatsApp bridge in %s: scan the QR code it prints in WhatsApp (Settings → Linked Devices)\n", bridge)
	if err := cmd.Run(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("the WhatsApp bridge (npm start in %s) failed: %w", bridge, err)
	}
	return nil
}

// nativeLogin links WhatsApp's native mode: the QR code is printed
// here, the device kept in the gateway's store (NB_STORE or
// gateway.store when it is PostgreSQL, else the state folder's file).
func (cl *cli) nativeLogin(ctx context.Context, c *config.Config, cfg whatsapp.Config) error {
	if !native.Built {
		return native.ErrNotBuilt
	}
	if err := cl.openStore(ctx, ""); err != nil { // NB_STORE
		return err
	}
	if err := cl.openStore(ctx, c.Gateway.Store); err != nil { // else gateway.store
		return err
	}
	defer cl.closeStore()
	env := channel.Env{Workspace: c.Workspace, StateDir: cl.gatewayState(c.Workspace).Channels, Postgres: cl.store.PostgresURL()}
	fmt.Fprintln(cl.stderr, "nb: linking WhatsApp (native mode): scan the QR code below in WhatsApp (Settings → Linked Devices → Link a device)")
	return native.Login(ctx, cfg, env, cl.stdout)
}

// lookPath finds an executable in the PATH given (the App's, not the
// process's).
func lookPath(name, path string) string {
	for _, dir := range strings.Split(path, string(os.PathListSeparator)) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() && info.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}
