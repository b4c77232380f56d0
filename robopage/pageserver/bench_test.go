package pageserver

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/robopage"
)

const benchPage = `functions:
  echo:
    description: echo
    parameters:
      message: {type: string, description: m}
    cmdline: [echo, "${message}"]
`

func benchServer(b *testing.B) (*httptest.Server, *robopage.Library) {
	dir := b.TempDir()
	os.WriteFile(filepath.Join(dir, "echo.yml"), []byte(benchPage), 0o644)
	lib, err := robopage.Load(dir, "")
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(&Server{Library: lib, Executor: &robopage.Executor{Workers: 64, Environ: os.Environ()}, Log: quietLog()})
	b.Cleanup(srv.Close)
	return srv, lib
}

// BenchmarkSpawnEcho is the floor: starting echo directly.
func BenchmarkSpawnEcho(b *testing.B) {
	echo, err := exec.LookPath("echo")
	if err != nil {
		b.Skip(err)
	}
	for b.Loop() {
		if out, err := exec.Command(echo, "hello").Output(); err != nil || string(out) != "hello\n" {
			b.Fatal(out, err)
		}
	}
}

// BenchmarkExecutorEcho runs echo through the executor (interpolation,
// process group, capped output, content layout).
func BenchmarkExecutorEcho(b *testing.B) {
	_, lib := benchServer(b)
	f, _ := lib.Function("echo")
	ex := &robopage.Executor{Environ: os.Environ()}
	args := map[string]string{"message": "hello"}
	for b.Loop() {
		if out, err := ex.Call(context.Background(), f, args); err != nil || out != "hello\n" {
			b.Fatal(out, err)
		}
	}
}

// BenchmarkProcessEcho is one POST /process with one echo call over
// loopback HTTP.
func BenchmarkProcessEcho(b *testing.B) {
	srv, _ := benchServer(b)
	client := srv.Client()
	body := `[{"id":"1","type":"function","function":{"name":"echo","arguments":{"message":"hello"}}}]`
	for b.Loop() {
		resp, err := client.Post(srv.URL+"/process", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatal(resp.Status)
		}
	}
}

// BenchmarkProcessEchoParallel posts from 200 goroutines at once.
func BenchmarkProcessEchoParallel(b *testing.B) {
	srv, _ := benchServer(b)
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	client := &http.Client{Transport: tr}
	defer tr.CloseIdleConnections()
	body := `[{"function":{"name":"echo","arguments":{"message":"hello"}}}]`
	b.SetParallelism(100) // 2 CPUs x 100 = 200 goroutines
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(srv.URL+"/process", "application/json", strings.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Error(resp.Status)
				return
			}
		}
	})
}

// BenchmarkProcessOverhead alternates a direct spawn of echo and a POST
// /process of one echo call, so both see the same machine load, and
// reports the median of each and the median of their differences.
func BenchmarkProcessOverhead(b *testing.B) {
	echo, err := exec.LookPath("echo")
	if err != nil {
		b.Skip(err)
	}
	srv, _ := benchServer(b)
	client := srv.Client()
	body := `[{"id":"1","type":"function","function":{"name":"echo","arguments":{"message":"hello"}}}]`
	var spawn, process, diff []time.Duration
	for b.Loop() {
		t0 := time.Now()
		if _, err := exec.Command(echo, "hello").Output(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		resp, err := client.Post(srv.URL+"/process", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		t2 := time.Now()
		spawn, process, diff = append(spawn, t1.Sub(t0)), append(process, t2.Sub(t1)), append(diff, t2.Sub(t1)-t1.Sub(t0))
	}
	ms := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2]) / float64(time.Millisecond)
	}
	b.ReportMetric(ms(spawn), "spawn-p50-ms")
	b.ReportMetric(ms(process), "process-p50-ms")
	b.ReportMetric(ms(diff), "overhead-p50-ms")
}
