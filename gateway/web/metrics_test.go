package web

import (
	"net/http"
	"testing"
	"time"

	"github.com/coder/websocket/wsjson"

	"github.com/nbots/nb/internal/httpguard"
	"github.com/nbots/nb/internal/metric/metrictest"
)

// The gateway's counters move by exactly the scripted traffic: two chat
// messages (received, a turn each, two replies delivered) and three
// GET /health.
func TestGatewayMetricsCountTraffic(t *testing.T) {
	srv, _ := startWith(t, func(s *Server) { s.Metrics = true })
	before := metrictest.Get(t, srv.URL+"/metrics")
	for range 3 {
		resp, err := http.Get(srv.URL + "/health")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	ctx, ws := dial(t, srv)
	for _, text := range []string{"one", "two"} {
		wsjson.Write(ctx, ws, Frame{Type: "message", ChatID: "m1", Content: text}) //nolint:errcheck // read below
		for {
			var f Frame
			if err := wsjson.Read(ctx, ws, &f); err != nil {
				t.Fatal(err)
			}
			if f.Type == "message" {
				break
			}
		}
	}
	want := map[string]float64{
		`nb_gateway_messages_received_total{channel="web"}`:                                      2,
		`nb_gateway_turns_total{channel="web",source="chat",outcome="ok"}`:                       2,
		`nb_gateway_turn_duration_seconds_count{channel="web",source="chat"}`:                    2,
		`nb_gateway_messages_delivered_total{channel="web"}`:                                     2,
		`nb_http_requests_total{server="gateway",route="GET /health",method="GET",status="2xx"}`: 3,
	}
	// A turn is counted once its reply is published, a delivery once the
	// socket has been written (the client may read it first): wait for
	// every series, then check none moved by more.
	var after metrictest.Scrape
	for range 250 {
		after = metrictest.Get(t, srv.URL+"/metrics")
		reached := true
		for series, n := range want {
			reached = reached && metrictest.Delta(before, after, series) >= n
		}
		if reached {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for series, n := range want {
		if got := metrictest.Delta(before, after, series); got != n {
			t.Errorf("%s moved by %v, want %v", series, got, n)
		}
	}
}

// /metrics on the gateway's listener takes its token; without one, only
// loopback names.
func TestGatewayMetricsGuard(t *testing.T) {
	tok, _ := httpguard.NewToken("", "0123456789abcdef0123")
	srv, _ := startWith(t, func(s *Server) { s.Metrics = true; s.Tokens = []*httpguard.Token{tok} })
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without the token: %d", resp.StatusCode)
	}
	metrictest.Get(t, srv.URL+"/metrics", "Authorization", "Bearer 0123456789abcdef0123")

	open, _ := startWith(t, func(s *Server) { s.Metrics = true })
	req, _ := http.NewRequest("GET", open.URL+"/metrics", nil)
	req.Host = "evil.example:80"
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a rebinding Host: %d", resp.StatusCode)
	}
}
