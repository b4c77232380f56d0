package nanobots

import (
	"strings"
	"testing"

	"github.com/nbots/nb/server"
)

// A stream belongs to the token that created it: another token's id
// answers as unknown, to polls and to event streams (issue 19 §4).
func TestStreamScopedToToken(t *testing.T) {
	alice, _ := server.NewToken("alice", "alice-secret-0123456789")
	alice.Cartridges = []string{"writer"}
	ci, _ := server.NewToken("ci", "ci-secret-0123456789abcd")
	ci.Cartridges = []string{"team/*"}
	f := newFixture(t, setup{files: cartridges, server: func(o *server.Options) { o.Tokens = []*server.Token{alice, ci} }})
	bearer := func(secret string) []string { return []string{"Authorization", "Bearer " + secret} }

	resp, body := f.do("POST", "/cartridges/stream", `{"cartridge": "writer", "input": "alice's secret plans"}`, bearer("alice-secret-0123456789")...)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	id := decodeJSON(t, body)["id"].(string)

	_, body = f.do("GET", "/cartridges/stream/"+id, "", bearer("ci-secret-0123456789abcd")...)
	if strings.Contains(body, "secret plans") || !strings.Contains(body, `"state":"unknown"`) {
		t.Fatalf("another token read alice's stream: %s", body)
	}
	_, body = f.do("GET", "/cartridges/stream/"+id, "", append(bearer("ci-secret-0123456789abcd"), "Accept", "text/event-stream")...)
	if strings.Contains(body, "secret plans") || !strings.Contains(body, "event: unknown") {
		t.Fatalf("another token read alice's stream as events: %s", body)
	}
	for range 100 {
		_, body = f.do("GET", "/cartridges/stream/"+id, "", bearer("alice-secret-0123456789")...)
		if !strings.Contains(body, `"state":"pending"`) {
			break
		}
	}
	if !strings.Contains(body, "secret plans") {
		t.Fatalf("alice cannot read her own stream: %s", body)
	}
}
