//go:build unix

package web

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHelperGatewayListener is not a test: the listener of
// TestIdleConnectionsDoNotLockOut, in a process of its own under a
// 1,024-descriptor limit as the probe's gateway was.
func TestHelperGatewayListener(t *testing.T) {
	if os.Getenv("NB_TEST_GATEWAY_LISTENER") != "1" {
		t.Skip("run by TestIdleConnectionsDoNotLockOut")
	}
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		t.Fatal(err)
	}
	l.Cur = min(1024, l.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		t.Fatal(err)
	}
	addr, stop := listener(t, t.TempDir())
	defer stop()
	fmt.Println("listening on", addr)
	time.Sleep(2 * time.Minute) // killed by the test before
}

// childListener runs TestHelperGatewayListener and returns its address.
func childListener(t *testing.T) string {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperGatewayListener$", "-test.v")
	cmd.Env = append(os.Environ(), "NB_TEST_GATEWAY_LISTENER=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() }) //nolint:errcheck // ours, ending
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if addr, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
			go func() {
				for sc.Scan() {
				}
			}()
			return addr
		}
	}
	t.Fatalf("the listener did not start: %v", sc.Err())
	return ""
}

// TestIdleConnectionsDoNotLockOut: 1,100 connections held idle (the
// probe's three kinds and silent ones) against a gateway under a
// 1,024-descriptor limit, from one address or spread over twenty (under
// the per-address cap, over the total), and the token holder's /ready and
// /ws are still served at once. Before, the listener had no idle deadline
// and no cap: it ran out of descriptors and the holder waited for minutes.
func TestIdleConnectionsDoNotLockOut(t *testing.T) {
	if c, err := dialFrom("127.0.0.2", "127.0.0.1:1"); err != nil && strings.Contains(err.Error(), "assign requested address") {
		t.Skip("no 127.0.0.2 on this machine")
	} else if c != nil {
		c.Close()
	}
	for _, spread := range []int{1, 20} {
		t.Run(fmt.Sprintf("from %d addresses", spread), func(t *testing.T) {
			addr := childListener(t)
			conns := make([]net.Conn, 0, 1100)
			defer func() {
				for _, c := range conns {
					c.Close()
				}
			}()
			for i := range 1100 {
				conns = append(conns, idle(t, i%4, fmt.Sprintf("127.0.0.%d", 2+i%spread), addr))
			}
			time.Sleep(200 * time.Millisecond) // let the listener take them
			holderServed(t, addr, holderToken)
		})
	}
}
