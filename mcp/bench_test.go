package mcp

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/tool"
)

// median returns the median of ds in microseconds.
func median(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2]) / float64(time.Microsecond)
}

// BenchmarkToolCall measures one call of the fake server's echo tool over
// stdio through nb (Tool.Run: session lookup, timeout, progress token,
// result mapping) and through the bare Go SDK session on a second copy of
// the same server, and reports the medians and their difference: what nb
// adds to a call.
//
//	go test ./mcp -run '^$' -bench ToolCall -benchtime 5000x
func BenchmarkToolCall(b *testing.B) {
	mark := uniqueMark(b)
	c, err := Start(context.Background(), Options{Servers: []cartridge.MCPServer{fakeConfig(b, "fake", "ok", mark)}, Environ: testEnviron()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var echo tool.Tool
	for _, x := range c.Tools() {
		if x.Spec().Name == "fake__echo" {
			echo = x
		}
	}

	exe, _ := os.Executable()
	cmd := exec.Command(exe)
	cmd.Env = append(testEnviron(), "NB_MCP_FAKE=ok", "NB_MCP_MARK="+mark)
	bare, err := sdk.NewClient(&sdk.Implementation{Name: "bench"}, nil).Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer bare.Close()

	ctx := context.Background()
	args := map[string]any{"text": "ping"}
	// Warm both paths.
	for range 200 {
		if _, err := echo.Run(ctx, tool.Call{Arguments: args}); err != nil {
			b.Fatal(err)
		}
		if _, err := bare.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: args}); err != nil {
			b.Fatal(err)
		}
	}
	nb := make([]time.Duration, 0, b.N)
	raw := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		out, err := echo.Run(ctx, tool.Call{Arguments: args})
		nb = append(nb, time.Since(t0))
		if err != nil || out.(*tool.Result).Text != "echo: ping" {
			b.Fatal(out, err)
		}
		t0 = time.Now()
		if _, err := bare.CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: args}); err != nil {
			b.Fatal(err)
		}
		raw = append(raw, time.Since(t0))
	}
	b.StopTimer()
	b.ReportMetric(median(nb), "nb-median-µs")
	b.ReportMetric(median(raw), "sdk-median-µs")
	b.ReportMetric(median(nb)-median(raw), "nb-adds-µs")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkConcurrentCalls makes 100 concurrent calls on one server
// connection per operation; any error fails it.
//
//	go test ./mcp -run '^$' -bench ConcurrentCalls -benchtime 20x
func BenchmarkConcurrentCalls(b *testing.B) {
	mark := uniqueMark(b)
	c, err := Start(context.Background(), Options{Servers: []cartridge.MCPServer{fakeConfig(b, "fake", "ok", mark)}, Environ: testEnviron()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	echo := c.Tools()[0]
	if echo.Spec().Name != "fake__echo" {
		b.Fatalf("first tool %s", echo.Spec().Name)
	}
	var rounds []time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, 100)
		for i := range 100 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, err := echo.Run(context.Background(), tool.Call{Arguments: map[string]any{"text": strconv.Itoa(i)}})
				if err != nil {
					errs <- err
				} else if got := out.(*tool.Result).Text; got != "echo: "+strconv.Itoa(i) {
					errs <- fmt.Errorf("call %d got %q", i, got)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		rounds = append(rounds, time.Since(t0))
	}
	b.StopTimer()
	b.ReportMetric(median(rounds)/1000, "median-ms/100-calls")
}
