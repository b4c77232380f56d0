package httpguard

import (
	"fmt"
	"net"
	"strings"
)

// IsLoopbackListen reports whether a listen address (host:port) is
// reachable from this machine only: localhost or a loopback address. An
// empty host (":3048") listens on every interface.
func IsLoopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// ListenError refuses a listener that other machines could reach
// without a token. The command that chose the address says how to give
// one: the library does not know its flags and variables.
type ListenError struct {
	// Addr is the refused listen address.
	Addr string
}

func (e *ListenError) Error() string {
	return fmt.Sprintf("refusing to listen on %s without a token: other machines could reach it", e.Addr)
}

// CheckListen returns a *ListenError when addr is reachable from other
// machines and the server has no tokens.
func CheckListen(addr string, tokens int) error {
	if tokens > 0 || IsLoopbackListen(addr) {
		return nil
	}
	return &ListenError{Addr: addr}
}
