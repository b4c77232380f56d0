package main

import (
	"github.com/nbots/nb/cmd/nb/gatewaycmd"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channels"
	"github.com/nbots/nb/gateway/config"
	"github.com/nbots/nb/gateway/gatewayrun"
	"github.com/nbots/nb/pipeline"
	"github.com/nbots/nb/pipeline/chatgate"
	"github.com/nbots/nb/pipeline/handler"
)

// chatGates says whether a flow has a human gate asked in a chat
// (human.channel).
func chatGates(g *pipeline.Graph) bool {
	for _, n := range g.Nodes {
		if n.Str(chatgate.Attr, "") != "" {
			return true
		}
	}
	return false
}

// pipelineGate is the interviewer of a flow whose gates name chats: the
// gateway configuration (--gateway-config, else nb gateway's own
// resolution: NB_GATEWAY_CONFIG, $XDG_CONFIG_HOME/nb/gateway.json,
// ~/.nanobot/config.json) gives the channels and their allowFrom; the
// other gates go to fallback. The channels keep their receive positions
// apart from nb gateway's (gatewayrun.Files.PipelineGates); the gates
// asked in the web chat meet the running nb gateway in its state folder
// (gatewayrun.Files.WebGates).
func (a *App) pipelineGate(flag string, fallback handler.Interviewer) (*chatgate.Gate, error) {
	env := config.Env(a.Environ)
	path, err := config.Find(flag, env)
	if err != nil {
		return nil, err
	}
	c, err := config.Load(path, "", env)
	if err != nil {
		return nil, err
	}
	st := gatewayrun.StateFiles(gatewaycmd.StateDir(a.Getenv), c.Workspace)
	g := chatgate.New(c.Channels, channels.Builtin(), channel.Env{Workspace: c.Workspace, StateDir: st.PipelineGates}, fallback)
	g.Source, g.WebDir = path, st.WebGates
	if path == "" {
		g.Source = "the default gateway configuration (no file: give one with --gateway-config)"
	}
	return g, nil
}
