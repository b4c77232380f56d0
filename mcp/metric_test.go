package mcp

import (
	"context"
	"testing"
	"time"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/internal/metric/metrictest"
	"github.com/nbots/nb/tool"
)

// nb_mcp_calls_total counts each call by the server's configured name,
// the tool and how it ended; nb_mcp_call_duration_seconds times each.
func TestMCPCallsCounted(t *testing.T) {
	mark := uniqueMark(t)
	cfg := fakeConfig(t, "metered", "ok", mark)
	cfg.Timeout = 300 * time.Millisecond
	c := start(t, Options{Servers: []cartridge.MCPServer{cfg}})
	before := metrictest.Read(t)
	for range 2 {
		if _, err := run(t, findTool(t, c, "metered__echo"), map[string]any{"text": "hi"}); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := run(t, findTool(t, c, "metered__fail"), nil); err != nil || !res.IsError {
		t.Fatalf("fail: %+v, %v", res, err)
	}
	if _, err := run(t, findTool(t, c, "metered__hang"), nil); err == nil {
		t.Fatal("hang answered")
	}
	ghost := &Tool{server: findTool(t, c, "metered__echo").(*Tool).server, remote: "ghost"}
	if _, err := ghost.Run(context.Background(), tool.Call{}); err == nil {
		t.Fatal("an unknown tool answered")
	}
	after := metrictest.Read(t)
	for series, want := range map[string]float64{
		`nb_mcp_calls_total{server="metered",tool="echo",outcome="ok"}`:         2,
		`nb_mcp_calls_total{server="metered",tool="fail",outcome="tool_error"}`: 1,
		`nb_mcp_calls_total{server="metered",tool="hang",outcome="timeout"}`:    1,
		`nb_mcp_calls_total{server="metered",tool="ghost",outcome="refused"}`:   1,
		`nb_mcp_call_duration_seconds_count{server="metered",tool="echo"}`:      2,
		`nb_mcp_call_duration_seconds_count{server="metered",tool="hang"}`:      1,
	} {
		if got := metrictest.Delta(before, after, series); got != want {
			t.Errorf("%s: %v, want %v", series, got, want)
		}
	}
	if got := after.Sum(`nb_mcp_calls_total{server="metered"`) - before.Sum(`nb_mcp_calls_total{server="metered"`); got != 5 {
		t.Errorf("%v calls counted, want 5", got)
	}
	c.Close()
	noLeftovers(t, mark)
}
