package mcp

import (
	"net/http"
	"net/http/httptest"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nbots/nb/cartridge"
)

// A remote server's headers (its credentials) go to that server only:
// a redirect to another host does not carry them there.
func TestHeadersStayWithTheirServer(t *testing.T) {
	got := make(chan string, 2)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- "other:" + r.Header.Get("Authorization")
	}))
	defer other.Close()
	own := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- "own:" + r.Header.Get("Authorization")
		http.Redirect(w, r, other.URL+"/elsewhere", http.StatusTemporaryRedirect)
	}))
	defer own.Close()
	c := &Clients{}
	tr := c.httpTransport(cartridge.MCPServer{Name: "s", URL: own.URL + "/mcp", Headers: map[string]string{"Authorization": "Bearer secret"}}, "")
	resp, err := tr.(*sdk.StreamableClientTransport).HTTPClient.Get(own.URL + "/mcp")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if a, b := <-got, <-got; a != "own:Bearer secret" || b != "other:" {
		t.Errorf("requests: %q, %q; the header must reach its own server only", a, b)
	}
}
