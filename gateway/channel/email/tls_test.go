package email

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"
	"github.com/emersion/go-smtp"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/channeltest"
)

// selfSigned is a certificate for 127.0.0.1 and a client configuration
// that trusts it alone.
func selfSigned(t *testing.T) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}},
		&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// TestTLS: IMAP over implicit TLS (the default, imapUseSsl) and SMTP with
// STARTTLS (the default, smtpUseTls), certificates checked.
func TestTLS(t *testing.T) {
	srvTLS, cliTLS := selfSigned(t)
	mem := imapmemserver.New()
	user := imapmemserver.NewUser(botAddr, imapPass)
	user.Create("INBOX", nil) //nolint:errcheck // a new user
	mem.AddUser(user)
	is := imapserver.New(&imapserver.Options{
		NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			return mem.NewSession(), nil, nil
		},
		Caps:      imap.CapSet{imap.CapIMAP4rev1: {}},
		TLSConfig: srvTLS,
		Logger:    log.New(io.Discard, "", 0),
	})
	iln, err := tls.Listen("tcp", "127.0.0.1:0", srvTLS)
	if err != nil {
		t.Fatal(err)
	}
	go is.Serve(iln) //nolint:errcheck // ends with Close
	defer is.Close()
	sink := &mailSink{}
	ss := smtp.NewServer(sink)
	ss.Domain, ss.TLSConfig = "localhost", srvTLS
	sln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go ss.Serve(sln) //nolint:errcheck // ends with Close
	defer ss.Close()

	s := &servers{user: user, imapAddr: iln.Addr().String(), smtpAddr: sln.Addr().String(), sink: sink}
	cfg := config(s)
	cfg.IMAPUseSSL, cfg.SMTPUseTLS = nil, nil // the defaults
	c, err := New(cfg, channel.Env{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	c.tls, c.poll = cliTLS, 20*time.Millisecond
	in := &channeltest.Inbox{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan struct{})
	go c.Run(ctx, in, func() { close(ready) }) //nolint:errcheck // ends with ctx
	select {
	case <-ready:
	case <-time.After(10 * time.Second):
		t.Fatal("not connected over TLS")
	}
	s.deliver(t, "alice@example.org", "secure", "over TLS")
	m := in.Wait(t, 1)[0]
	if _, err := c.Send(ctx, bus.Outbound{Kind: bus.Message, ChatID: m.ChatID, Content: "answered over STARTTLS"}); err != nil {
		t.Fatal(err)
	}
	if len(sink.mails()) != 1 {
		t.Error("no mail sent")
	}
	// A certificate the client does not trust is refused.
	c.tls = &tls.Config{MinVersion: tls.VersionTLS12}
	if _, err := c.Send(ctx, bus.Outbound{Kind: bus.Message, ChatID: "bob@example.org", Content: "x"}); err == nil {
		t.Error("an untrusted certificate was accepted")
	}
}
