package email

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
)

// Mailing lists, bounces and other automatic responders are never
// answered; each is logged with its reason and passed.
func TestListsAndRespondersNotAnswered(t *testing.T) {
	for _, c := range []struct {
		name, from string
		header     string
		why        string
	}{
		{"List-Id", "list@example.org", "List-Id: <dev.lists.example.org>", "List-Id"},
		{"List-Unsubscribe", "news@example.org", "List-Unsubscribe: <mailto:leave@example.org>", "List-Unsubscribe"},
		{"X-Autoreply", "away@example.org", "X-Autoreply: yes", "X-Autoreply"},
		{"X-Autorespond", "away@example.org", "X-Autorespond: vacation", "X-Autorespond"},
		{"empty Return-Path", "bounce@example.org", "Return-Path: <>", "empty Return-Path"},
		{"Auto-Submitted", "robot@example.org", "Auto-Submitted: auto-generated", "Auto-Submitted: auto-generated"},
		{"Precedence bulk", "bulk@example.org", "Precedence: bulk", "Precedence: bulk"},
		{"MAILER-DAEMON", "MAILER-DAEMON@example.org", "X-Note: a bounce", "a mail system"},
		{"a list's -request address", "dev-request@example.org", "X-Note: list admin", "a mail system"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newServers(t)
			h := start(t, config(s), channel.Env{})
			time.Sleep(50 * time.Millisecond)
			s.deliver(t, c.from, "automatic", "do not answer", c.header)
			s.deliver(t, "person@example.org", "human", "answer me", "Return-Path: <person@example.org>")
			m := h.in.Wait(t, 1)[0]
			time.Sleep(100 * time.Millisecond)
			if len(h.in.Messages()) != 1 || m.SenderID != "person@example.org" {
				t.Errorf("handed over %+v", h.in.Messages())
			}
			if !strings.Contains(h.logs.String(), c.why) {
				t.Errorf("the log does not say %q:\n%s", c.why, h.logs)
			}
		})
	}
}

// A responder that marks itself with nothing the rules know (only a rare
// header) cannot ping-pong: past maxRepliesPerHour its mails are not
// handed over, and answers past it are not mailed.
func TestRepliesPerHour(t *testing.T) {
	s := newServers(t)
	cfg := config(s)
	cfg.MaxRepliesPerHour = 3
	h := start(t, cfg, channel.Env{})
	time.Sleep(50 * time.Millisecond)
	for i := range 5 {
		s.deliver(t, "responder@example.org", fmt.Sprintf("Re: Re: ping %d", i), "I got your mail.", "X-Rare-Responder: 1")
	}
	s.deliver(t, "owner@example.org", "mine", "not limited by another's loop")
	got := h.in.Wait(t, 4)
	time.Sleep(200 * time.Millisecond)
	if got = h.in.Messages(); len(got) != 4 || got[3].SenderID != "owner@example.org" {
		t.Fatalf("handed over %d: %+v", len(got), got)
	}
	if !strings.Contains(h.logs.String(), "channels.email.maxRepliesPerHour") {
		t.Errorf("the log does not say why:\n%s", h.logs)
	}
	// Answers: three mailed, the fourth (a proactive mail is no answer)
	// refused.
	for i, m := range got[:3] {
		if _, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: m.ChatID, ReplyTo: m.ID, Content: "pong"}); err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
	}
	h.ch.mu.Lock()
	h.ch.threads.add("uid:9:99", thread{from: "responder@example.org", subject: "one more"})
	h.ch.mu.Unlock()
	_, err := h.ch.Send(context.Background(), bus.Outbound{Kind: bus.Message, ChatID: "responder@example.org", ReplyTo: "uid:9:99", Content: "pong"})
	if !channel.IsUndeliverable(err) || !strings.Contains(err.Error(), "maxRepliesPerHour") {
		t.Errorf("a fourth answer in the hour: %v", err)
	}
	if n := len(s.sink.mails()); n != 3 {
		t.Errorf("%d mails sent", n)
	}
}

func TestPerHour(t *testing.T) {
	p := perHour{limit: 2}
	t0 := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	p.add("a", t0)
	p.add("a", t0.Add(10*time.Minute))
	if p.allow("a", t0.Add(59*time.Minute)) || !p.allow("b", t0) {
		t.Error("within the hour")
	}
	if !p.allow("a", t0.Add(61*time.Minute)) {
		t.Error("the first event an hour old still counts")
	}
}
