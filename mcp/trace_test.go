package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/tracing"
)

// With tracing on, a request to a remote MCP server carries the
// traceparent of the call that sends it; without a span, none.
func TestHTTPTraceparent(t *testing.T) {
	sink := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer sink.Close()
	stop, err := tracing.Setup(func(k string) string {
		if k == "OTEL_EXPORTER_OTLP_ENDPOINT" {
			return sink.URL
		}
		return ""
	}, "test")
	if err != nil {
		t.Fatal(err)
	}
	defer stop(context.Background()) //nolint:errcheck // test
	got := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get("Traceparent")
	}))
	defer srv.Close()
	c := &Clients{}
	client := c.httpTransport(cartridge.MCPServer{Name: "s", URL: srv.URL + "/mcp"}, "").(*sdk.StreamableClientTransport).HTTPClient
	ctx, span := tracing.StartMCP(context.Background(), "tools/call", "search", "s")
	for _, ctx := range []context.Context{ctx, context.Background()} {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/mcp", strings.NewReader("{}"))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	span.End()
	want := "00-" + span.SpanContext().TraceID().String() + "-" + span.SpanContext().SpanID().String() + "-01"
	if a, b := <-got, <-got; a != want || b != "" {
		t.Errorf("traceparents %q, %q; want %q then none", a, b, want)
	}
}
