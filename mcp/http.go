package mcp

import (
	"net/http"
	"net/url"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/tracing"
)

// httpTransport returns the transport for a remote server: kind "sse"
// is the legacy HTTP+SSE transport, anything else streamable HTTP. The
// cartridge's headers go on every request to the server's own scheme and
// host, and on no other: a redirect elsewhere does not carry them. Each
// request carries the W3C traceparent of its call when tracing is on.
func (c *Clients) httpTransport(cfg cartridge.MCPServer, kind string) sdk.Transport {
	base := c.cfg.HTTPClient
	if base == nil {
		base = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	if len(cfg.Headers) > 0 {
		rt = &headerTransport{base: rt, headers: cfg.Headers, origin: origin(cfg.URL)}
	}
	// Requests carry the trace context of the call that sent them.
	copied := *base
	copied.Transport = tracing.Transport(rt)
	client := &copied
	if kind == "sse" {
		return &sdk.SSEClientTransport{Endpoint: cfg.URL, HTTPClient: client}
	}
	return &sdk.StreamableClientTransport{Endpoint: cfg.URL, HTTPClient: client, MaxRetries: 2}
}

// headerTransport adds fixed headers (Authorization...) to every request
// to origin (scheme://host).
type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
	origin  string
}

func (t *headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if origin(r.URL.String()) != t.origin {
		return t.base.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	return t.base.RoundTrip(r)
}

// origin is the scheme and host of u, lower case; "" if u does not parse.
func origin(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return strings.ToLower(p.Scheme + "://" + p.Host)
}

func urlPath(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	return p.Path
}
