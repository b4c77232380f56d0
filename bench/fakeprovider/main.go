// Command fakeprovider serves the in-process OpenAI fake on a local port,
// for benchmarks of the nb binary against an instant provider. It prints
// its address on stdout once it listens.
//
//	fakeprovider -chunks 100000 -size 1024   # a long streamed answer
//	fakeprovider -chunks 20 -delay 1s -tls bench/out/fake.pem
//	    # slow streams over HTTPS and HTTP/2 (the certificate is written to
//	    # the file, for SSL_CERT_FILE), as a real provider serves them:
//	    # thousands of streams share a few connections
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"fmt"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/nbots/nb/provider/openai/openaitest"
	"github.com/nbots/nb/provider/providertest"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	chunks := flag.Int("chunks", 1, "number of streamed text chunks in every answer")
	size := flag.Int("size", 6, "bytes of text in each chunk")
	delay := flag.Duration("delay", 0, "wait before each streamed chunk")
	certFile := flag.String("tls", "", "serve HTTPS (and HTTP/2) with a new self-signed certificate for 127.0.0.1, written to this `file`")
	flag.Parse()

	piece := strings.Repeat("x", *size)
	reply := providertest.Reply{Chunks: make([]string, *chunks), Delay: *delay}
	for i := range reply.Chunks {
		reply.Chunks[i] = piece
	}
	fake := openaitest.New(func(providertest.Turn) providertest.Reply { return reply })
	fake.Recorder = nil
	fake.SplitBytes = 1 << 20 // one write per frame
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	// One HTTP/2 connection takes every stream: real providers take 100
	// or more per connection, and a fake that makes nb open a connection
	// for each hundred measures TLS handshakes, not nb.
	srv := &http.Server{Handler: fake, HTTP2: &http.HTTP2Config{MaxConcurrentStreams: 100_000}}
	if *certFile == "" {
		fmt.Println("http://" + ln.Addr().String())
		os.Stdout.Sync() //nolint:errcheck // a pipe
		log.Fatal(srv.Serve(ln))
	}
	cert, err := selfSigned(*certFile)
	if err != nil {
		log.Fatal(err)
	}
	srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
	fmt.Println("https://" + ln.Addr().String())
	os.Stdout.Sync() //nolint:errcheck // a pipe
	log.Fatal(srv.ServeTLS(ln, "", ""))
}

// selfSigned makes a certificate for 127.0.0.1 and localhost and writes
// it to path as PEM.
func selfSigned(path string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "nb bench fake provider"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
