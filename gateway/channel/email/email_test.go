package email

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"mime"
	"mime/multipart"
	"net"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/nbots/nb/gateway/access"
	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/channeltest"
	"github.com/nbots/nb/internal/testbuf"
)

const (
	botAddr  = "bot@example.com"
	imapPass = "imap-secret-pw"
	smtpPass = "smtp-secret-pw"
)

// mailSink is an SMTP server's backend that keeps what it receives and
// checks the login.
type mailSink struct {
	mu   sync.Mutex
	got  []*mail.Message
	rcpt []string
}

type sinkSession struct {
	s     *mailSink
	authd bool
	to    []string
}

func (s *mailSink) NewSession(*smtp.Conn) (smtp.Session, error) { return &sinkSession{s: s}, nil }
func (ss *sinkSession) AuthMechanisms() []string                { return []string{sasl.Plain} }
func (ss *sinkSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != botAddr || pass != smtpPass {
			return errors.New("535 bad credentials")
		}
		ss.authd = true
		return nil
	}), nil
}
func (ss *sinkSession) Mail(string, *smtp.MailOptions) error {
	if !ss.authd {
		return &smtp.SMTPError{Code: 530, Message: "Authentication required"}
	}
	return nil
}
func (ss *sinkSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	if strings.HasPrefix(to, "nobody@") {
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "No such user"}
	}
	ss.to = append(ss.to, to)
	return nil
}
func (ss *sinkSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m, err := mail.ReadMessage(bytes.NewReader(b))
	if err != nil {
		return err
	}
	ss.s.mu.Lock()
	ss.s.got = append(ss.s.got, m)
	ss.s.rcpt = append(ss.s.rcpt, ss.to...)
	ss.s.mu.Unlock()
	return nil
}
func (ss *sinkSession) Reset()        { ss.to = nil }
func (ss *sinkSession) Logout() error { return nil }

func (s *mailSink) mails() []*mail.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*mail.Message(nil), s.got...)
}

// servers is an IMAP server (go-imap's in-memory one) and an SMTP server
// (go-smtp) on loopback ports.
type servers struct {
	user     *imapmemserver.User
	imapAddr string
	smtpAddr string
	sink     *mailSink
	n        int
}

func newServers(t *testing.T) *servers {
	t.Helper()
	mem := imapmemserver.New()
	user := imapmemserver.NewUser(botAddr, imapPass)
	if err := user.Create("INBOX", nil); err != nil {
		t.Fatal(err)
	}
	mem.AddUser(user)
	is := imapserver.New(&imapserver.Options{
		NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			return mem.NewSession(), nil, nil
		},
		Caps:         imap.CapSet{imap.CapIMAP4rev1: {}},
		InsecureAuth: true,
		Logger:       log.New(io.Discard, "", 0),
	})
	iln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go is.Serve(iln) //nolint:errcheck // ends with Close
	t.Cleanup(func() { is.Close() })
	sink := &mailSink{}
	ss := smtp.NewServer(sink)
	ss.Domain = "localhost"
	ss.AllowInsecureAuth = true
	sln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go ss.Serve(sln) //nolint:errcheck // ends with Close
	t.Cleanup(func() { ss.Close() })
	return &servers{user: user, imapAddr: iln.Addr().String(), smtpAddr: sln.Addr().String(), sink: sink}
}

// deliver puts a mail into the inbox; headers are "Key: value" lines.
func (s *servers) deliver(t *testing.T, from, subject, body string, headers ...string) string {
	t.Helper()
	s.n++
	id := fmt.Sprintf("<m%d@example.org>", s.n)
	raw := "From: " + from + "\r\nTo: " + botAddr + "\r\nSubject: " + subject + "\r\nMessage-ID: " + id +
		"\r\nDate: Thu, 26 Nov 2026 04:00:00 +0000\r\n"
	for _, h := range headers {
		raw += h + "\r\n"
	}
	raw += "\r\n" + body
	if _, err := s.user.Append("INBOX", bytes.NewReader([]byte(raw)), &imap.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	return id
}

func port(addr string) (string, int) {
	h, p, _ := net.SplitHostPort(addr)
	var n int
	fmt.Sscan(p, &n) //nolint:errcheck // our own listener's address
	return h, n
}

func config(s *servers) Config {
	ih, ip := port(s.imapAddr)
	sh, sp := port(s.smtpAddr)
	off := false
	return Config{
		Enabled: true, ConsentGranted: true,
		IMAPHost: ih, IMAPPort: ip, IMAPUsername: botAddr, IMAPPassword: imapPass, IMAPUseSSL: &off,
		SMTPHost: sh, SMTPPort: sp, SMTPUsername: botAddr, SMTPPassword: smtpPass, SMTPUseTLS: &off,
		FromAddress: botAddr, PollIntervalSeconds: 1,
		// Everyone: these tests are about mail, not access (TestStranger…).
		AllowFrom: []string{"*"},
	}
}

type harness struct {
	ch   *Channel
	in   *channeltest.Inbox
	stop func()
	logs *testbuf.Buffer
}

func start(t *testing.T, cfg Config, env channel.Env) *harness {
	t.Helper()
	return startPoll(t, cfg, env, 20*time.Millisecond)
}

// startPoll is start with the interval between polls.
func startPoll(t *testing.T, cfg Config, env channel.Env, poll time.Duration) *harness {
	t.Helper()
	logs := &testbuf.Buffer{}
	env.Logger = slog.New(slog.NewTextHandler(logs, nil))
	if env.StateDir == "" {
		env.StateDir = t.TempDir()
	}
	c, err := New(cfg, env)
	if err != nil {
		t.Fatal(err)
	}
	c.poll, c.retryBase, c.timeout = poll, 5*time.Millisecond, 2*time.Second
	c.idleRefresh = min(10*poll, time.Hour)
	// The gateway's inbox admits whom allowFrom names.
	in := &channeltest.Inbox{Admit: func(m bus.Inbound) bool { return access.Matches(Name, c.cfg.AllowFrom, m.SenderID) }}
	h := &harness{ch: c, in: in, logs: logs}
	t.Cleanup(func() {
		if l := logs.String(); strings.Contains(l, imapPass) || strings.Contains(l, smtpPass) {
			t.Errorf("a password is in the logs:\n%s", l)
		}
	})
	h.stop = channeltest.Start(t, c, h.in)
	return h
}

func TestConsentRequired(t *testing.T) {
	s := newServers(t)
	cfg := config(s)
	cfg.ConsentGranted = false
	if _, err := New(cfg, channel.Env{}); err == nil || !strings.Contains(err.Error(), "channels.email.consentGranted") {
		t.Errorf("New without consent: %v", err)
	}
}

func TestConversationInThread(t *testing.T) {
	s := newServers(t)
	h := start(t, config(s), channel.Env{})
	id := s.deliver(t, "Alice <Alice@Example.org>", "=?utf-8?q?Caf=C3=A9_plans?=", "Shall we meet at 10?", "References: <older@example.org>")
	m := h.in.Wait(t, 1)[0]
	if m.Channel != "email" || m.SenderID != "alice@example.org" || m.ChatID != "alice@example.org" || !strings.HasPrefix(m.ID, "uid:") || m.Metadata["message_id"] != id {
		t.Errorf("%+v", m)
	}
	if m.Content != "Subject: Café plans\n\nShall we meet at 10?" {
		t.Errorf("content %q", m.Content)
	}
	if _, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: m.ChatID, ReplyTo: m.ID, Content: "Yes — 10 works.\nSee you."}); err != nil {
		t.Fatal(err)
	}
	mails := s.sink.mails()
	if len(mails) != 1 {
		t.Fatalf("%d mails sent", len(mails))
	}
	a := mails[0]
	subject, _ := words.DecodeHeader(a.Header.Get("Subject"))
	checks := map[string]string{
		"To": "<alice@example.org>", "In-Reply-To": id, "References": "<older@example.org> " + id,
		"Auto-Submitted": "auto-replied", "From": "<" + botAddr + ">",
	}
	for k, want := range checks {
		if got := a.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if subject != "Re: Café plans" {
		t.Errorf("subject %q", subject)
	}
	body, _ := textOf(a.Header.Get("Content-Type"), a.Header.Get("Content-Transfer-Encoding"), a.Body)
	if strings.TrimSpace(body) != "Yes — 10 works.\r\nSee you." {
		t.Errorf("body %q", body)
	}
	// One answer per mail (RFC 3834), even after a restart.
	_, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: m.ChatID, ReplyTo: m.ID, Content: "again"})
	if !channel.IsUndeliverable(err) || !strings.Contains(err.Error(), "already answered") {
		t.Errorf("a second answer: %v", err)
	}
	// Progress is not mailed.
	if id, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Progress, ChatID: m.ChatID, Content: "…"}); id != "" || err != nil || len(s.sink.mails()) != 1 {
		t.Errorf("progress mailed: %q %v", id, err)
	}
}

func TestRFC3834(t *testing.T) {
	s := newServers(t)
	h := start(t, config(s), channel.Env{})
	s.deliver(t, botAddr, "loop", "from myself")
	s.deliver(t, "daemon@example.org", "vacation", "away", "Auto-Submitted: auto-replied")
	s.deliver(t, "robot@example.org", "report", "generated", "Auto-Submitted: auto-generated; type=report")
	s.deliver(t, "news@example.org", "news", "bulk", "Precedence: bulk")
	s.deliver(t, "list@example.org", "list", "list", "Precedence: list")
	s.deliver(t, "spam@example.org", "junk", "junk", "Precedence: junk")
	s.deliver(t, "bob@example.org", "person", "answer me", "Auto-Submitted: no")
	got := h.in.Wait(t, 1)
	time.Sleep(200 * time.Millisecond)
	if got = h.in.Messages(); len(got) != 1 || got[0].SenderID != "bob@example.org" {
		t.Errorf("carried %+v", got)
	}
	for _, why := range []string{"own address", "Auto-Submitted: auto-replied", "Auto-Submitted: auto-generated", "Precedence: bulk", "Precedence: list", "Precedence: junk"} {
		if !strings.Contains(h.logs.String(), why) {
			t.Errorf("the log does not say %q", why)
		}
	}
	if _, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: botAddr, Content: "x"}); !channel.IsUndeliverable(err) {
		t.Errorf("a mail to itself: %v", err)
	}
	if _, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: "nobody@example.org", Content: "x"}); !channel.IsUndeliverable(err) || !strings.Contains(err.Error(), "550") {
		t.Errorf("a refused recipient: %v", err)
	}
}

func TestBodies(t *testing.T) {
	s := newServers(t)
	cfg := config(s)
	cfg.MaxBodyChars = 20
	h := start(t, cfg, channel.Env{})
	s.deliver(t, "a@example.org", "long", strings.Repeat("x", 50))
	s.deliver(t, "b@example.org", "html", "<p>Hello <b>there</b></p>", "MIME-Version: 1.0", "Content-Type: text/html; charset=utf-8")
	s.deliver(t, "c@example.org", "alt",
		"--B\r\nContent-Type: text/plain; charset=iso-8859-1\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nd=E9j=E0 vu\r\n--B\r\nContent-Type: text/html\r\n\r\n<p>html</p>\r\n--B--\r\n",
		"MIME-Version: 1.0", "Content-Type: multipart/alternative; boundary=B")
	got := h.in.Wait(t, 3)
	want := []string{
		"Subject: long\n\n" + strings.Repeat("x", 20) + "\n[… cut at channels.email.maxBodyChars]",
		"Subject: html\n\nHello **there**",
		"Subject: alt\n\ndéjà vu",
	}
	for i, w := range want {
		if got[i].Content != w {
			t.Errorf("mail %d: %q, want %q", i, got[i].Content, w)
		}
	}
}

func TestRestartNeitherReplaysNorSkips(t *testing.T) {
	s := newServers(t)
	env := channel.Env{StateDir: t.TempDir()}
	s.deliver(t, "old@example.org", "before", "mail from before the first start is not answered")
	h := start(t, config(s), env)
	s.deliver(t, "a@example.org", "one", "1")
	h.in.Wait(t, 1)
	h.stop()
	s.deliver(t, "a@example.org", "two", "2")
	s.deliver(t, "a@example.org", "three", "3")
	h2 := start(t, config(s), env)
	got := h2.in.Wait(t, 2)
	time.Sleep(200 * time.Millisecond)
	if got = h2.in.Messages(); len(got) != 2 || !strings.Contains(got[0].Content, "two") || !strings.Contains(got[1].Content, "three") {
		t.Errorf("after the restart: %+v", got)
	}
	if b, err := os.ReadFile(filepath.Join(env.StateDir, "email.cursor")); err != nil || !strings.HasSuffix(strings.TrimSpace(string(b)), ":4") {
		t.Errorf("cursor %q %v", b, err)
	}
}

// resetter is a TCP proxy to the IMAP server whose connections a test
// can cut.
type resetter struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	cuts  int
}

func newResetter(t *testing.T, target string) *resetter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &resetter{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			r.mu.Lock()
			r.conns = append(r.conns, c, u)
			r.mu.Unlock()
			go func() { io.Copy(u, c); u.Close() }() //nolint:errcheck // a proxy
			go func() { io.Copy(c, u); c.Close() }() //nolint:errcheck // a proxy
		}
	}()
	return r
}

func (r *resetter) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0) //nolint:errcheck // a reset
		}
		c.Close()
	}
	r.conns = nil
	r.cuts++
}

func TestHundredDisconnectsLoseNothing(t *testing.T) {
	s := newServers(t)
	proxy := newResetter(t, s.imapAddr)
	cfg := config(s)
	cfg.IMAPHost, cfg.IMAPPort = port(proxy.ln.Addr().String())
	h := start(t, cfg, channel.Env{})
	const n = 40
	for i := range 100 {
		if i < n {
			s.deliver(t, fmt.Sprintf("p%d@example.org", i), fmt.Sprintf("mail %d", i), "hi")
		}
		time.Sleep(3 * time.Millisecond)
		proxy.cut()
	}
	got := h.in.Wait(t, n)
	time.Sleep(300 * time.Millisecond)
	got = h.in.Messages()
	seen := map[string]int{}
	for _, m := range got {
		seen[m.ID]++
	}
	if len(seen) != n {
		t.Errorf("%d distinct mails of %d", len(seen), n)
	}
	for i, m := range got {
		if i < n && !strings.Contains(m.Content, fmt.Sprintf("mail %d\n", i)) {
			t.Fatalf("mail %d is %q: out of order or lost", i, m.Content)
		}
	}
	if len(got) > n {
		t.Logf("%d mails published twice after a cut (the bus drops them by Message-ID)", len(got)-n)
	}
}

func TestRefusedLoginIsFinal(t *testing.T) {
	s := newServers(t)
	cfg := config(s)
	cfg.IMAPPassword = "wrong-secret"
	c, err := New(cfg, channel.Env{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Run(context.Background(), &channeltest.Inbox{}, func() { t.Error("ready") })
	if err == nil || !strings.Contains(err.Error(), "imapPassword") || strings.Contains(err.Error(), "wrong-secret") {
		t.Errorf("Run: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	s := newServers(t)
	base := config(s)
	for _, c := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.IMAPHost = "" }, "imapHost"},
		{func(c *Config) { c.SMTPHost = "" }, "smtpHost"},
		{func(c *Config) { c.FromAddress = "bot" }, "fromAddress"},
		{func(c *Config) { c.IMAPHost = "imap.example.org" }, "imapUseSsl is false"},
		{func(c *Config) { c.SMTPHost = "smtp.example.org" }, "smtpUseTls and smtpUseSsl are false"},
	} {
		cfg := base
		c.edit(&cfg)
		if _, err := New(cfg, channel.Env{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v, want %q", err, c.want)
		}
	}
}

func TestAttachmentsMailed(t *testing.T) {
	s := newServers(t)
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "report.pdf"), []byte("%PDF-1.4 report"), 0o600)
	os.WriteFile(filepath.Join(ws, "notes é.txt"), []byte("plain notes"), 0o600)
	h := start(t, config(s), channel.Env{Workspace: ws})
	s.deliver(t, "alice@example.org", "files", "send me the report")
	m := h.in.Wait(t, 1)[0]
	_, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: m.ChatID, Content: "Here it is.",
		Media: []string{filepath.Join(ws, "report.pdf"), "notes é.txt", "/etc/hostname"}})
	if err != nil {
		t.Fatal(err)
	}
	a := s.sink.mails()[0]
	mt, params, _ := mime.ParseMediaType(a.Header.Get("Content-Type"))
	if mt != "multipart/mixed" {
		t.Fatalf("Content-Type %q", a.Header.Get("Content-Type"))
	}
	mr := multipart.NewReader(a.Body, params["boundary"])
	var texts, names, contents []string
	for {
		p, err := mr.NextPart()
		if err != nil {
			break
		}
		b, _ := io.ReadAll(p)
		if p.FileName() == "" {
			texts = append(texts, string(b))
			continue
		}
		names = append(names, p.FileName()+" "+p.Header.Get("Content-Type"))
		dec, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(string(b), "\r\n", ""))
		if err != nil {
			t.Errorf("%s: %v", p.FileName(), err)
		}
		contents = append(contents, string(dec))
	}
	if len(texts) != 1 || !strings.HasPrefix(texts[0], "Here it is.") || !strings.Contains(texts[0], "(hostname not attached: outside the workspace)") {
		t.Errorf("text parts %q", texts)
	}
	want := []string{`report.pdf application/pdf; name=report.pdf`, `notes é.txt text/plain; name*=utf-8''notes%20%C3%A9.txt`}
	if strings.Join(names, "|") != strings.Join(want, "|") || strings.Join(contents, "|") != "%PDF-1.4 report|plain notes" {
		t.Errorf("attachments %q %q", names, contents)
	}
}

func TestAttachmentsReceived(t *testing.T) {
	s := newServers(t)
	ws := t.TempDir()
	cfg := config(s)
	cfg.MaxMediaBytes = 100
	h := start(t, cfg, channel.Env{Workspace: ws})
	body := "--b1\r\nContent-Type: multipart/alternative; boundary=b2\r\n\r\n" +
		"--b2\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nSee attached.\r\n--b2\r\nContent-Type: text/html\r\n\r\n<p>See attached.</p>\r\n--b2--\r\n" +
		"--b1\r\nContent-Type: image/png; name=\"=?utf-8?q?ch=C3=A9rie.png?=\"\r\nContent-Disposition: attachment\r\nContent-Transfer-Encoding: base64\r\n\r\n" +
		base64.StdEncoding.EncodeToString([]byte("PNG-bytes")) + "\r\n" +
		"--b1\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=\"../../big.pdf\"\r\nContent-Transfer-Encoding: base64\r\n\r\n" +
		base64.StdEncoding.EncodeToString(make([]byte, 101)) + "\r\n--b1--\r\n"
	s.deliver(t, "alice@example.org", "photo", body, "MIME-Version: 1.0", "Content-Type: multipart/mixed; boundary=b1")
	m := h.in.Wait(t, 1)[0]
	if len(m.Media) != 1 || !strings.HasPrefix(m.Media[0], filepath.Join(ws, "media", "email")+string(filepath.Separator)) || !strings.HasSuffix(m.Media[0], "ch_rie.png") {
		t.Fatalf("media %q", m.Media)
	}
	if b, err := os.ReadFile(m.Media[0]); err != nil || string(b) != "PNG-bytes" {
		t.Errorf("stored %q %v", b, err)
	}
	if !strings.HasPrefix(m.Content, "Subject: photo\n\nSee attached.\n\n[attachment: "+m.Media[0]+"]") ||
		!strings.Contains(m.Content, "[attachment big.pdf not received: over the limit of 100 bytes (channels.email.maxMediaBytes)]") {
		t.Errorf("content %q", m.Content)
	}
}

func TestIdleReadsMailAsItArrives(t *testing.T) {
	s := newServers(t)
	h := startPoll(t, config(s), channel.Env{}, time.Hour) // no polling to speak of: only IDLE can tell
	for i := range 3 {
		time.Sleep(100 * time.Millisecond) // the channel back in IDLE
		t0 := time.Now()
		s.deliver(t, "alice@example.org", fmt.Sprintf("n%d", i), "hello")
		h.in.Wait(t, i+1)
		if d := time.Since(t0); d > 5*time.Second {
			t.Errorf("mail %d read after %s", i, d)
		}
	}
	if !strings.Contains(h.logs.String(), "supports IDLE") {
		t.Errorf("IDLE not used:\n%s", h.logs)
	}
}

func TestPollingWithoutIdle(t *testing.T) {
	s := newServers(t)
	cfg := config(s)
	off := false
	cfg.IMAPIdle = &off
	h := start(t, cfg, channel.Env{})
	s.deliver(t, "alice@example.org", "polled", "hello")
	h.in.Wait(t, 1)
	if strings.Contains(h.logs.String(), "supports IDLE") {
		t.Error("IDLE used with imapIdle false")
	}
}

// A turn's answer mailed again by another replica (the first died after
// the server took it, before recording it) has the same Message-ID, so
// the correspondent's mail store keeps one copy.
func TestRepeatedAnswerSameMessageID(t *testing.T) {
	s := newServers(t)
	a := start(t, config(s), channel.Env{})
	b := start(t, config(s), channel.Env{})
	s.deliver(t, "alice@example.org", "plans", "10?")
	m := a.in.Wait(t, 1)[0]
	b.in.Wait(t, 1)
	reply := bus.Outbound{Kind: bus.Message, ChatID: m.ChatID, Turn: "turn-1", Content: "Yes."}
	for _, h := range []*harness{a, b} {
		if _, err := h.ch.Send(context.Background(), reply); err != nil {
			t.Fatal(err)
		}
	}
	mails := s.sink.mails()
	if len(mails) != 2 {
		t.Fatalf("%d mails", len(mails))
	}
	id0, id1 := mails[0].Header.Get("Message-ID"), mails[1].Header.Get("Message-ID")
	if id0 != id1 || !strings.HasPrefix(id0, "<nb") {
		t.Errorf("Message-IDs %q and %q, want one turn-derived id", id0, id1)
	}
	// Outside a turn, each mail has its own.
	if _, err := a.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: "bob@example.org", Content: "hi"}); err != nil {
		t.Fatal(err)
	}
	if id := s.sink.mails()[2].Header.Get("Message-ID"); id == id0 || strings.HasPrefix(id, "<nb") {
		t.Errorf("Message-ID outside a turn %q", id)
	}
}

// textOf is the text of a mail's body with the given Content-Type and
// Content-Transfer-Encoding, as the channel reads it.
func textOf(contentType, encoding string, r io.Reader) (string, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return "", err
	}
	raw := []byte("Content-Type: " + contentType + "\r\nContent-Transfer-Encoding: " + encoding + "\r\n\r\n" + string(b))
	c := &Channel{cfg: Config{MaxBodyChars: 1 << 20}}
	ents, err := scanMIME(context.Background(), raw, Limits{})
	if err != nil {
		return "", err
	}
	html := maxHTMLBytes
	return c.textOf(context.Background(), ents, 0, &html)
}
