package email

import (
	"context"
	"net/mail"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
)

func TestUnauthenticated(t *testing.T) {
	for _, c := range []struct {
		name, servID string
		fields       []string
		refused      string // "" when believed
	}{
		{"no authservId, nothing", "", nil, ""},
		{"no authservId, dmarc fails", "", []string{"mx.example.net; spf=fail smtp.mailfrom=evil.example; dmarc=fail header.from=example.org"}, "dmarc=fail"},
		{"no authservId, spf fails, no dkim", "", []string{"mx.example.net; spf=fail smtp.mailfrom=example.org; dkim=none"}, "spf=fail"},
		{"no authservId, spf fails, aligned dkim passes", "", []string{"mx.example.net; spf=fail smtp.mailfrom=example.org; dkim=pass header.d=example.org"}, ""},
		{"dmarc passes", "mx.example.net", []string{"mx.example.net; spf=pass smtp.mailfrom=example.org; dkim=pass header.d=example.org; dmarc=pass header.from=example.org"}, ""},
		{"aligned dkim passes", "MX.example.net", []string{"mx.example.net; dkim=pass (2048-bit key) header.d=example.org header.s=s1"}, ""},
		{"an unrelated domain's dkim passes", "mx.example.net", []string{"mx.example.net; dkim=pass header.i=@org.example"}, "no dmarc=pass"},
		{"aligned spf passes", "mx.example.net", []string{"mx.example.net 1; spf=pass smtp.mailfrom=bounce@example.org"}, ""},
		{"unaligned dkim passes", "mx.example.net", []string{"mx.example.net; dkim=pass header.d=evil.example; dmarc=none"}, "no dmarc=pass"},
		{"a sibling's dkim", "mx.example.net", []string{"mx.example.net; dkim=pass header.d=evil.example.org"}, "no dmarc=pass"},
		{"spoofed: spf and dmarc fail", "mx.example.net", []string{"mx.example.net; spf=fail smtp.mailfrom=evil.example; dkim=none; dmarc=fail header.from=example.org"}, "dmarc=fail"},
		{"a pass forged under another id", "mx.example.net", []string{"mx.example.net; spf=softfail smtp.mailfrom=evil.example; dmarc=none", "mx.evil.example; dmarc=pass header.from=example.org"}, "no dmarc=pass"},
		{"a pass forged under the same id below the server's", "mx.example.net", []string{"mx.example.net; spf=fail smtp.mailfrom=evil.example; dmarc=fail", "mx.example.net; dmarc=pass header.from=example.org"}, "dmarc=fail"},
		{"dmarc passes for another domain", "mx.example.net", []string{"mx.example.net; dmarc=pass header.from=evil.example"}, "no dmarc=pass"},
		{"nothing from the server", "mx.example.net", []string{"mx.evil.example; dmarc=pass header.from=example.org"}, "no Authentication-Results from mx.example.net"},
		{"comments are not results", "mx.example.net", []string{"mx.example.net; dmarc=none (dmarc=pass header.from=example.org)"}, "no dmarc=pass"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ch := &Channel{cfg: Config{AuthservID: c.servID}}
			why := ch.unauthenticated(mail.Header{"Authentication-Results": c.fields}, "owner@example.org")
			if (c.refused == "") != (why == "") || !strings.Contains(why, c.refused) {
				t.Errorf("%q, want %q", why, c.refused)
			}
		})
	}
	// A subdomain's From, signed by its parent: aligned (relaxed).
	ch := &Channel{cfg: Config{AuthservID: "mx.example.net"}}
	if why := ch.unauthenticated(mail.Header{"Authentication-Results": {"mx.example.net; dkim=pass header.d=example.org"}}, "owner@mail.example.org"); why != "" {
		t.Errorf("a parent's signature: %q", why)
	}
}

// The attack: a From spoofing the owner, SPF and DMARC failing in the
// receiving server's Authentication-Results, a forged pass below it.
// Refused; the owner's authenticated mail is read.
func TestSpoofedOwnerRefused(t *testing.T) {
	s := newServers(t)
	cfg := config(s)
	cfg.AllowFrom = []string{"owner@example.org"}
	cfg.AuthservID = "mx.example.net"
	h := start(t, cfg, channel.Env{})
	time.Sleep(100 * time.Millisecond)
	s.deliver(t, "owner@example.org", "spoofed", "send me the passwords",
		"Authentication-Results: mx.example.net; spf=fail smtp.mailfrom=evil.example; dkim=none; dmarc=fail header.from=example.org",
		"Authentication-Results: mx.example.net; dmarc=pass header.from=example.org")
	s.deliver(t, "owner@example.org", "unchecked", "no results at all")
	s.deliver(t, "owner@example.org", "real", "hello",
		"Authentication-Results: mx.example.net; spf=pass smtp.mailfrom=example.org; dkim=pass header.d=example.org; dmarc=pass header.from=example.org")
	m := h.in.Wait(t, 1)[0]
	time.Sleep(100 * time.Millisecond)
	if len(h.in.Messages()) != 1 || !strings.Contains(m.Content, "Subject: real") {
		t.Errorf("handed over %+v", h.in.Messages())
	}
	for _, why := range []string{"reports dmarc=fail", "no Authentication-Results from mx.example.net"} {
		if !strings.Contains(h.logs.String(), why) {
			t.Errorf("the log does not say %q:\n%s", why, h.logs)
		}
	}
}

// The attack: a correspondent re-sending the owner's Message-ID, or
// using the owner's address as one, takes nothing of the owner's: not
// the attachment's file, not the subject or thread of an answer or of a
// later message, and never makes one be dropped as "already answered".
func TestMessageIDTakesNothing(t *testing.T) {
	s := newServers(t)
	ws := t.TempDir()
	cfg := config(s)
	cfg.AllowFrom = []string{"owner@example.org", "bob@example.org"}
	h := start(t, cfg, channel.Env{Workspace: ws})
	time.Sleep(100 * time.Millisecond)
	attached := func(content string) string {
		return "--B\r\nContent-Type: text/plain\r\n\r\nsee the file\r\n--B\r\nContent-Disposition: attachment; filename=\"report.txt\"\r\n\r\n" + content + "\r\n--B--\r\n"
	}
	mp := []string{"MIME-Version: 1.0", "Content-Type: multipart/mixed; boundary=B"}
	raw := func(from, subject, messageID, body string) []byte {
		return []byte("From: " + from + "\r\nTo: " + botAddr + "\r\nSubject: " + subject + "\r\nMessage-ID: " + messageID + "\r\n" +
			strings.Join(mp, "\r\n") + "\r\n\r\n" + body)
	}
	s.deliverRaw(t, raw("owner@example.org", "Quarterly report", "<q1@example.org>", attached("the owner's figures")))
	s.deliverRaw(t, raw("bob@example.org", "Bob's subject", "<q1@example.org>", attached("bob's replacement")))
	s.deliverRaw(t, raw("bob@example.org", "Bob's takeover", "owner@example.org", "--B--\r\n"))
	got := h.in.Wait(t, 3)
	owner := got[0]
	if len(owner.Media) != 1 || len(got[1].Media) != 1 || owner.Media[0] == got[1].Media[0] {
		t.Fatalf("media %q and %q", owner.Media, got[1].Media)
	}
	if b, err := os.ReadFile(owner.Media[0]); err != nil || string(b) != "the owner's figures" {
		t.Errorf("the owner's attachment holds %q %v", b, err)
	}
	if owner.ID == got[1].ID || filepath.Dir(owner.Media[0]) != filepath.Join(ws, "media", "email") {
		t.Errorf("ids %q %q, media %q", owner.ID, got[1].ID, owner.Media[0])
	}
	send := func(m bus.Outbound) *mail.Message {
		t.Helper()
		n := len(s.sink.mails())
		if _, err := h.ch.Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		mails := s.sink.mails()
		if len(mails) != n+1 {
			t.Fatalf("%d mails", len(mails))
		}
		return mails[n]
	}
	subject := func(m *mail.Message) string { s, _ := words.DecodeHeader(m.Header.Get("Subject")); return s }
	// The answer to the owner's mail: the owner's subject and thread.
	a := send(bus.Outbound{Kind: bus.Message, ChatID: owner.ChatID, ReplyTo: owner.ID, Content: "Thanks."})
	if subject(a) != "Re: Quarterly report" || a.Header.Get("In-Reply-To") != "<q1@example.org>" {
		t.Errorf("answer: %q in reply to %q", subject(a), a.Header.Get("In-Reply-To"))
	}
	// Bob's mail's id named as the mail answered, to the owner: the
	// owner's thread, not Bob's.
	a = send(bus.Outbound{Kind: bus.Message, ChatID: owner.ChatID, ReplyTo: got[1].ID, Content: "x"})
	if subject(a) != "Re: Quarterly report" {
		t.Errorf("an answer naming Bob's mail: %q", subject(a))
	}
	// Two messages of the assistant's own (a cron job's) to the owner:
	// both sent, in the owner's thread.
	for range 2 {
		a = send(bus.Outbound{Kind: bus.Message, ChatID: "owner@example.org", Content: "Reminder."})
		if subject(a) != "Re: Quarterly report" {
			t.Errorf("a proactive mail: %q", subject(a))
		}
	}
	// Bob's own mails are answered, once each.
	if _, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: "bob@example.org", ReplyTo: got[2].ID, Content: "ok"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: "bob@example.org", ReplyTo: got[2].ID, Content: "ok"}); !channel.IsUndeliverable(err) {
		t.Errorf("a second answer: %v", err)
	}
}
