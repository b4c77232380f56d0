// Package natstest starts a NATS server with JetStream inside a test
// process, on a loopback port, storing under a test's temporary folder.
// Only tests import it: the nats-server module is never linked into nb
// (TestServerNotLinked checks).
package natstest

import (
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Server is a running in-process NATS server.
type Server struct {
	*server.Server
	dir  string
	port int
}

// Start starts a server for t, stopped when t ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{dir: t.TempDir(), port: -1}
	s.start(t)
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

func (s *Server) start(t testing.TB) {
	t.Helper()
	ns, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      s.port,
		JetStream: true,
		StoreDir:  s.dir,
		NoSigs:    true,
		NoLog:     true,
	})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	s.Server = ns
	s.port = ns.Addr().(*net.TCPAddr).Port
}

// URL is nats://127.0.0.1:PORT.
func (s *Server) URL() string { return s.ClientURL() }

// Restart stops the server and starts it again on the same port and
// store: what a client sees when its NATS goes away and comes back.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Shutdown()
	s.WaitForShutdown()
	s.start(t)
}
