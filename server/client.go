package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/internal/metric"
	"github.com/nbots/nb/netguard"
	"github.com/nbots/nb/provider"
)

// ClientCartridgeName names a cartridge a client sent, in messages.
const ClientCartridgeName = "request.cartridge"

// ClientBot builds a bot for a cartridge a client sent (JSON or YAML
// source). Such a cartridge never reads the server's environment and never
// reaches the server's files or credentials:
//   - it is parsed with no environment, and refused when it has an ENV
//     reference (naming the key), because a client would otherwise have the
//     server send its API keys to an address of the client's choosing;
//   - the provider gets no host credentials (AllowHostCredentials false),
//     and a Google cartridge that would read a credentials file or the
//     application default credentials is refused;
//   - state (state.path, state.directory) and robopages keys, which name
//     folders of the server, are refused, and so are builtins (files,
//     commands, the network of the server) and mcp servers (programs the
//     server would start);
//   - its functions always run sandboxed (Clojure, which cannot be, is
//     refused when called);
//   - its provider reaches public addresses only (netguard), unless the
//     operator names the host in Options.ClientHosts: otherwise a client
//     could have the server send requests into its own network or to a
//     cloud metadata service (credentials.address is the client's
//     choice). It connects directly, not through the server's proxy,
//     whose own address would pass the check for any destination.
//
// The bot is held, and closed, with the request (or the run started with
// Admit). Errors are *Error: 403 when the server takes no client
// cartridges, 400 for a cartridge that breaks a rule or does not parse.
func (s *Server) ClientBot(ctx context.Context, src []byte) (*bot.Bot, error) {
	if !s.opts.ClientCartridges {
		return nil, &Error{Status: http.StatusForbidden, Message: "this server runs only its own cartridges: send a cartridge id (GET /cartridges lists them)"}
	}
	c, err := cartridge.Parse(src, ClientCartridgeName, cartridge.FormatYAML, nil)
	if err != nil {
		return nil, &Error{Status: http.StatusBadRequest, Message: err.Error(), Err: err}
	}
	if err := CheckClientCartridge(c); err != nil {
		return nil, err
	}
	h := s.host
	h.AllowHostCredentials = false
	h.AllowMCP = false
	h.ForceSandbox = true
	h.HTTPClient = s.clientProviderHTTP()
	h.Metrics.Model = metric.Other // the client's text: never a label
	setCartridge(ctx, ClientCartridgeName)
	b, err := s.cat.Build(ctx, ClientCartridgeName, c, h)
	if err != nil {
		return nil, &Error{Status: http.StatusBadRequest, Message: err.Error(), Err: err}
	}
	// Closed when the request (or its run) lets go.
	if !leasesFrom(ctx).Adopt(b, s.cat.OnClose(ClientCartridgeName)) {
		b.Close() //nolint:errcheck // nothing holds it
		return nil, &Error{Status: http.StatusInternalServerError, Message: "a client's cartridge can only run inside a request"}
	}
	return b, nil
}

// clientProviderHTTP is the HTTP client of client cartridges' providers:
// provider.ClientFor's settings, without a proxy, dialling through a
// netguard.Guard that lets Options.ClientHosts through.
func (s *Server) clientProviderHTTP() *http.Client {
	s.clientHTTPOnce.Do(func() {
		t := provider.ClientFor(nil).Transport.(*http.Transport).Clone()
		g := &netguard.Guard{AllowHosts: s.opts.ClientHosts, Dialer: &net.Dialer{Timeout: 2 * time.Minute, KeepAlive: 30 * time.Second},
			Hint: "the provider of a cartridge sent by a client reaches public addresses only; the operator may allow this host"}
		if h := s.limits.Names.ClientHosts; h != "" {
			g.Hint += " with " + h
		}
		t.Proxy = nil
		t.DialContext = g.DialContext
		s.clientHTTP = &http.Client{Transport: t}
	})
	return s.clientHTTP
}

// CheckClientCartridge applies the rules of ClientBot to a parsed
// cartridge: no ENV reference, no state folder, no robopages, no host
// credential files.
func CheckClientCartridge(c *cartridge.Cartridge) *Error {
	if len(c.EnvRefs) > 0 {
		r := c.EnvRefs[0]
		return &Error{Status: http.StatusBadRequest, Param: "cartridge",
			Message: fmt.Sprintf("%s: %s is ENV/%s: a cartridge sent to the server may not read the server's environment; put the value itself in the cartridge, or ask the operator to serve the cartridge", ClientCartridgeName, r.Path, r.Var)}
	}
	for _, key := range []string{"path", "directory"} {
		if _, ok := c.Get("state", key); ok {
			return &Error{Status: http.StatusBadRequest, Param: "cartridge",
				Message: fmt.Sprintf("%s: state.%s names a folder of the server: a cartridge sent to the server may not choose where states are kept; remove it", ClientCartridgeName, key)}
		}
	}
	if _, ok := c.Get("robopages"); ok {
		return &Error{Status: http.StatusBadRequest, Param: "cartridge",
			Message: fmt.Sprintf("%s: robopages name folders of the server: a cartridge sent to the server may not load them; ask the operator to serve the cartridge", ClientCartridgeName)}
	}
	if _, ok := c.Get("builtins"); ok {
		return &Error{Status: http.StatusBadRequest, Param: "cartridge",
			Message: fmt.Sprintf("%s: builtins work on the server's files, commands and network: a cartridge sent to the server may not switch them on; ask the operator to serve the cartridge", ClientCartridgeName)}
	}
	if _, ok := c.Get("mcp"); ok {
		return &Error{Status: http.StatusBadRequest, Param: "cartridge",
			Message: fmt.Sprintf("%s: mcp servers are programs the server would start: a cartridge sent to the server may not name them; ask the operator to serve the cartridge", ClientCartridgeName)}
	}
	creds := c.Map("provider", "credentials")
	for k := range creds {
		if strings.ReplaceAll(k, "_", "-") == "file-path" {
			return &Error{Status: http.StatusBadRequest, Param: "cartridge",
				Message: fmt.Sprintf("%s: provider.credentials.%s names a file of the server: a cartridge sent to the server must carry its credentials itself (file-contents or api-key)", ClientCartridgeName, k)}
		}
	}
	if c.String("provider", "id") == "google" && c.String("provider", "credentials", "service") == "vertex-ai-api" &&
		!hasAny(creds, "api-key", "file-contents") {
		return &Error{Status: http.StatusBadRequest, Param: "cartridge",
			Message: fmt.Sprintf("%s: provider.credentials has neither api-key nor file-contents: a cartridge sent to the server may not use the server's Google credentials", ClientCartridgeName)}
	}
	return nil
}

func hasAny(m map[string]any, keys ...string) bool {
	for k, v := range m {
		for _, want := range keys {
			if strings.ReplaceAll(k, "_", "-") == want && v != nil && strings.TrimSpace(fmt.Sprint(v)) != "" {
				return true
			}
		}
	}
	return false
}
