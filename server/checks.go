package server

import "net/http"

// The checks below are nb serve's own, for the other listeners of nb
// (the chat gateway's) that face browsers and programs the same way.

// IsLoopbackHost reports whether a Host header names this machine
// (localhost, its subdomains, a loopback address): a request that reaches
// a loopback listener under another name comes through DNS rebinding.
func IsLoopbackHost(host string) bool { return isLoopbackHost(host) }

// Authenticate returns the token whose secret is the request's bearer
// token, or an error (status 401) saying what is wrong.
func Authenticate(tokens []*Token, r *http.Request) (*Token, error) {
	t, err := authenticate(tokens, r)
	if err != nil {
		return nil, err
	}
	return t, nil
}
