package email

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
)

// nested is a mail whose body is multipart/mixed nested depth deep, as
// the attack's (100,000 levels: 7.4 MB).
func nested(from string, depth int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: %s\r\nTo: %s\r\nSubject: bomb\r\nMessage-ID: <bomb@example.org>\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b0\"\r\n\r\n", from, botAddr)
	for i := 1; i <= depth; i++ {
		fmt.Fprintf(&b, "--b%d\r\nContent-Type: multipart/mixed; boundary=\"b%d\"\r\n\r\n", i-1, i)
	}
	fmt.Fprintf(&b, "--b%d\r\nContent-Type: text/plain\r\n\r\nat the bottom\r\n", depth)
	for i := depth; i >= 0; i-- {
		fmt.Fprintf(&b, "--b%d--\r\n", i)
	}
	return b.Bytes()
}

func (s *servers) deliverRaw(t *testing.T, raw []byte) {
	t.Helper()
	if _, err := s.user.Append("INBOX", bytes.NewReader(raw), &imap.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
}

// The scan is linear whatever the nesting, limits off: eight times the
// levels take about eight times as long (mime/multipart's nested readers
// took 1.5 s for 1,000 levels, 9 s for 2,000, 140 s for 8,000: sixty
// times as long for eight times the levels), and 100,000 levels take
// about a second where 8,000 took minutes.
func TestScanMIMELinear(t *testing.T) {
	scan := func(depth int) time.Duration {
		raw := nested("owner@example.org", depth)
		best := time.Hour
		for range 3 {
			t0 := time.Now()
			ents, err := scanMIME(context.Background(), raw, Limits{})
			best = min(best, time.Since(t0))
			if err != nil {
				t.Fatal(err)
			}
			if len(ents) != depth+2 || string(ents[len(ents)-1].body) != "at the bottom" {
				t.Fatalf("%d entities, the last %q", len(ents), ents[len(ents)-1].body)
			}
		}
		return best
	}
	small, large := scan(12_500), scan(100_000)
	t.Logf("12,500 levels: %s; 100,000 levels: %s", small, large)
	if !raceOn && (large > 24*small || large > 10*time.Second) {
		t.Errorf("not linear: 12,500 levels %s, 100,000 levels %s", small, large)
	}
}

func TestScanMIMELimits(t *testing.T) {
	many := "From: a@example.org\r\nContent-Type: multipart/mixed; boundary=B\r\n\r\n" +
		strings.Repeat("--B\r\nContent-Type: text/plain\r\n\r\nx\r\n", 300) + "--B--\r\n"
	bigPart := "From: a@example.org\r\nContent-Type: multipart/mixed; boundary=B\r\n\r\n--B\r\nX-Junk: " + strings.Repeat("j", 200<<10) + "\r\n\r\nx\r\n--B--\r\n"
	for _, c := range []struct {
		name string
		raw  []byte
		key  string
	}{
		{"depth", nested("a@example.org", 17), "maxMimeDepth"},
		{"parts", []byte(many), "maxMimeParts"},
		{"part header", []byte(bigPart), "maxHeaderBytes"},
		{"mail header", []byte("From: a@example.org\r\nX-Junk: " + strings.Repeat("j", 200<<10) + "\r\n\r\nx"), "maxHeaderBytes"},
		{"size", append(nested("a@example.org", 1), make([]byte, 1<<20)...), "maxMailBytes"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := scanMIME(context.Background(), c.raw, Limits{MailBytes: 1 << 20, Depth: DefaultMaxMimeDepth, Parts: DefaultMaxMimeParts, HeaderBytes: DefaultMaxHeaderBytes})
			var le *LimitError
			if !errors.As(err, &le) || le.Key != c.key || !strings.Contains(err.Error(), "channels.email."+c.key) {
				t.Errorf("%v, want the limit %s", err, c.key)
			}
		})
	}
	// Within the limits: read.
	if _, err := scanMIME(context.Background(), nested("a@example.org", 15), Limits{Depth: DefaultMaxMimeDepth, Parts: DefaultMaxMimeParts}); err != nil {
		t.Errorf("15 levels: %v", err)
	}
}

// A cancelled context stops a scan: the gateway's shutdown is not held
// by a mail, even one the limits let through.
func TestScanMIMECancelled(t *testing.T) {
	raw := nested("a@example.org", 100_000)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := scanMIME(ctx, raw, Limits{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("a scan with a cancelled context: %v", err)
	}
	// Cancelled while it scans (limits off: the scan takes a while).
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := scanMIME(ctx, raw, Limits{})
		done <- err
	}()
	time.Sleep(5 * time.Millisecond)
	cancel()
	t0 := time.Now()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("a scan cancelled while it ran: %v", err)
		}
		t.Logf("stopped %s after the cancel", time.Since(t0))
	case <-time.After(time.Second):
		t.Error("the scan went on for a second after the cancel")
	}
}

// The attack: a stranger's (here: an allowed sender's, the worse case)
// mail nested 100,000 deep. It is refused by the limit's name within a
// second, flagged, passed; the owner's next mail is handed over; a
// restart does not read the bomb again.
func TestMailBombRefused(t *testing.T) {
	s := newServers(t)
	env := channel.Env{StateDir: t.TempDir(), Workspace: t.TempDir()}
	h := start(t, config(s), env)
	t0 := time.Now()
	s.deliverRaw(t, nested("owner@example.org", 100_000))
	s.deliver(t, "owner@example.org", "next", "are you there?")
	m := h.in.Wait(t, 1)[0]
	d := time.Since(t0)
	if !strings.Contains(m.Content, "are you there?") {
		t.Fatalf("handed over %q", m.Content)
	}
	if d > 3*time.Second && !raceOn { // the fake server's own work on 7.4 MB included
		t.Errorf("the owner's mail waited %s", d)
	}
	t.Logf("the owner's mail handed over %s after the bomb arrived", d)
	if _, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: m.ChatID, ReplyTo: m.ID, Content: "Yes."}); err != nil {
		t.Fatal(err)
	}
	mails := s.sink.mails()
	if len(mails) != 1 {
		t.Fatalf("%d mails sent", len(mails))
	}
	if subject, _ := words.DecodeHeader(mails[0].Header.Get("Subject")); subject != "Re: next" {
		t.Errorf("the owner's answer: %q", subject)
	}
	logs := h.logs.String()
	if !strings.Contains(logs, "quarantined") || !strings.Contains(logs, "limit=maxMimeDepth") {
		t.Errorf("the log does not name the limit:\n%s", logs)
	}
	if got := s.flags(t, 1); !strings.Contains(strings.ToLower(got), strings.ToLower(string(QuarantineFlag))) {
		t.Errorf("the bomb's flags %q", got)
	}
	h.stop()
	h2 := start(t, config(s), env)
	s.deliver(t, "owner@example.org", "after", "restarted")
	h2.in.Wait(t, 1)
	time.Sleep(100 * time.Millisecond)
	if strings.Contains(h2.logs.String(), "quarantined") || len(h2.in.Messages()) != 1 {
		t.Errorf("after the restart: %v\n%s", h2.in.Messages(), h2.logs)
	}
}

// The channel's own work on the bomb, limits on: well under a second,
// even with the race detector.
func TestMailBombParse(t *testing.T) {
	c, err := New(Config{ConsentGranted: true, IMAPHost: "127.0.0.1", IMAPUsername: "u", FromAddress: botAddr, AutoReplyEnabled: new(bool), IMAPUseSSL: new(bool)}, channel.Env{})
	if err != nil {
		t.Fatal(err)
	}
	raw := nested("owner@example.org", 100_000)
	t0 := time.Now()
	_, err = c.parse(context.Background(), raw, "1:1")
	d := time.Since(t0)
	var le *LimitError
	if !errors.As(err, &le) || le.Key != "maxMimeDepth" {
		t.Errorf("%v, want the limit maxMimeDepth", err)
	}
	if d > time.Second {
		t.Errorf("refused in %s", d)
	}
	t.Logf("refused in %s", d)
}

// Stopping the gateway stops a parse in progress: with the limits raised
// out of the way, a mail nested 250,000 deep takes a while to scan, and
// Run still returns at once when its context ends.
func TestStopDuringParse(t *testing.T) {
	s := newServers(t)
	cfg := config(s)
	cfg.MaxMimeDepth, cfg.MaxMimeParts = 1<<30, 1<<30
	h := start(t, cfg, channel.Env{})
	s.deliverRaw(t, nested("owner@example.org", 250_000))
	// Until the channel has fetched the mail: the fake server's reads
	// of it and the channel's parse then run for a while.
	time.Sleep(300 * time.Millisecond)
	t0 := time.Now()
	h.stop()
	d := time.Since(t0)
	if len(h.in.Messages()) > 0 {
		t.Skip("the parse ended before the stop: nothing to show on this machine")
	}
	if d > time.Second && !raceOn {
		t.Errorf("Run returned %s after its context ended", d)
	}
	t.Logf("Run returned %s after its context ended", d)
}

// flags are the flags of the mail with uid in the inbox, read over IMAP
// the way a mail program would.
func (s *servers) flags(t *testing.T, uid imap.UID) string {
	t.Helper()
	c, err := New(config(s), channel.Env{})
	if err != nil {
		t.Fatal(err)
	}
	client, err := c.dialIMAP(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := client.Login(botAddr, imapPass).Wait(); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Select("INBOX", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	msgs, err := client.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{UID: true, Flags: true}).Collect()
	if err != nil || len(msgs) != 1 {
		t.Fatalf("fetch flags: %v %d", err, len(msgs))
	}
	return fmt.Sprint(msgs[0].Flags)
}

// A stranger's attachments are never fetched nor written: the channel
// reads the header, sees the sender is not in allowFrom, and passes.
func TestStrangerAttachmentsNotStored(t *testing.T) {
	s := newServers(t)
	ws := t.TempDir()
	cfg := config(s)
	cfg.AllowFrom = []string{"owner@example.org"}
	h := start(t, cfg, channel.Env{Workspace: ws})
	time.Sleep(100 * time.Millisecond)
	var body strings.Builder
	for i := range 30 {
		fmt.Fprintf(&body, "--B\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=\"f%d.bin\"\r\n\r\n%s\r\n", i, strings.Repeat("z", 10_000))
	}
	body.WriteString("--B--\r\n")
	s.deliver(t, "stranger@example.net", "files", body.String(), "MIME-Version: 1.0", "Content-Type: multipart/mixed; boundary=B")
	s.deliver(t, "owner@example.org", "hello", "just text")
	m := h.in.Wait(t, 1)[0]
	time.Sleep(100 * time.Millisecond)
	if m.SenderID != "owner@example.org" || len(h.in.Messages()) != 1 {
		t.Errorf("handed over %+v", h.in.Messages())
	}
	if entries, err := os.ReadDir(filepath.Join(ws, "media")); err == nil || len(entries) > 0 {
		t.Errorf("the media folder exists: %v %v", entries, err)
	}
	if !strings.Contains(h.logs.String(), "not in channels.email.allowFrom") {
		t.Errorf("the log does not say why:\n%s", h.logs)
	}
}

// Each limit, met over IMAP: the mail is quarantined by the limit's
// name and the next one read.
func TestLimitsQuarantine(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Config)
		raw  string
		key  string
	}{
		{"size", func(c *Config) { c.MaxMailBytes = 10_000 }, "From: owner@example.org\r\n\r\n" + strings.Repeat("x", 20_000), "maxMailBytes"},
		{"header", func(c *Config) { c.MaxHeaderBytes = 1000 }, "From: owner@example.org\r\nX-Junk: " + strings.Repeat("j", 5000) + "\r\n\r\nbody", "maxHeaderBytes"},
		{"parts", func(c *Config) { c.MaxMimeParts = 5 }, "From: owner@example.org\r\nContent-Type: multipart/mixed; boundary=B\r\n\r\n" +
			strings.Repeat("--B\r\n\r\nx\r\n", 6) + "--B--\r\n", "maxMimeParts"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newServers(t)
			cfg := config(s)
			c.edit(&cfg)
			h := start(t, cfg, channel.Env{})
			s.deliverRaw(t, []byte(c.raw))
			s.deliver(t, "owner@example.org", "next", "read me")
			m := h.in.Wait(t, 1)[0]
			time.Sleep(50 * time.Millisecond)
			if len(h.in.Messages()) != 1 || !strings.Contains(m.Content, "read me") {
				t.Errorf("handed over %+v", h.in.Messages())
			}
			if !strings.Contains(h.logs.String(), "limit="+c.key) {
				t.Errorf("the log does not name %s:\n%s", c.key, h.logs)
			}
			if got := s.flags(t, 1); !strings.Contains(strings.ToLower(got), strings.ToLower(string(QuarantineFlag))) {
				t.Errorf("flags %q", got)
			}
		})
	}
}
