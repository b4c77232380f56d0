package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"

	"github.com/nbots/nb/agentproto"
)

// agentsError says in the user's words why the server could not be
// reached or refused: which server, the token's variable, the likely
// cause. Other errors pass unchanged.
func (a *App) agentsError(server string, f agentsClientFlags, err error) error {
	tokenFrom := "NB_AGENTS_TOKEN"
	if *f.token != "" {
		tokenFrom = "--token"
	} else if a.Getenv("NB_AGENTS_TOKEN") == "" {
		tokenFrom = ""
	}
	var he *agentproto.HTTPError
	var dnsErr *net.DNSError
	switch {
	case errors.As(err, &he) && (he.Status == http.StatusUnauthorized || he.Status == http.StatusForbidden):
		if tokenFrom == "" {
			return fmt.Errorf("%s wants a token (HTTP %d): set NB_AGENTS_TOKEN to the server's token (its NB_SERVE_TOKEN), or pass --token", server, he.Status)
		}
		return fmt.Errorf("%s refused the token of %s (HTTP %d): it is not one of the server's tokens (its NB_SERVE_TOKEN or tokens file), or it may not use this agent", server, tokenFrom, he.Status)
	case errors.As(err, &he) && he.Status == http.StatusNotFound:
		return fmt.Errorf("%s: no such agent there (HTTP 404; nb agents list %s shows its agents), or it is not an nb server", he.URL, server)
	case errors.As(err, &he):
		return fmt.Errorf("%s answered HTTP %d: %s", server, he.Status, he.Message)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%s: nothing listens there: is nb serve running, on this address and port?", server)
	case errors.As(err, &dnsErr):
		return fmt.Errorf("%s: the host %s is not known (%s)", server, dnsErr.Name, dnsErr.Err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s did not answer within 30 s: is it an nb server, and reachable?", server)
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return fmt.Errorf("%s cannot be reached: %v", server, errors.Unwrap(err))
	}
	return err
}
