package server

import (
	"net/http"

	"github.com/nbots/nb/internal/httpguard"
)

// IsLoopbackHost reports whether a Host header names this machine; see
// httpguard.IsLoopbackHost.
func IsLoopbackHost(host string) bool { return httpguard.IsLoopbackHost(host) }

// Authenticate returns the token whose secret is the request's bearer
// token, or an error (status 401) saying what is wrong.
func Authenticate(tokens []*Token, r *http.Request) (*Token, error) {
	return httpguard.Authenticate(tokens, r)
}
