package channeltest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
)

// Platform is one platform's fake with one bot account on it, as the
// conformance suite drives it. A channel package's tests implement it
// over its kit (telegramtest, …).
type Platform interface {
	// Channel makes a new channel for the account with env's folders:
	// two channels made with the same env share their receive position,
	// as a gateway restarted on the same state folder does.
	Channel(t *testing.T, env channel.Env) channel.Channel
	// Say makes a person the channel admits write text to the bot, where
	// the channel takes it (a private chat); it returns the chat id the
	// channel publishes the message with and sends answers to. The
	// published content holds text, perhaps framed (an email's subject).
	Say(t *testing.T, text string) (chatID string)
	// Sent is the texts of the bot's messages in the chat so far, in
	// order.
	Sent(t *testing.T, chatID string) []string
}

// Throttler is implemented by platforms whose fake can refuse the bot's
// next send with the platform's "too many requests" (asking to wait a
// second); the suite's pacing test needs it.
type Throttler interface {
	Throttle(t *testing.T)
}

// Factory makes a fresh platform for one test of the suite; its cleanup
// is the test's.
type Factory func(t *testing.T) Platform

// Conformance runs what every channel.Channel must do against the
// platforms open makes: start when asked and stop when its context
// ends, publish what people write, deliver and split what the assistant
// answers, keep its receive position behind what the gateway holds, and
// stop waiting when a send's context ends.
func Conformance(t *testing.T, open Factory) {
	t.Run("StartStop", func(t *testing.T) { startStop(t, open) })
	t.Run("Receive", func(t *testing.T) { receive(t, open) })
	t.Run("SendAndSplit", func(t *testing.T) { sendAndSplit(t, open) })
	t.Run("DurableBeforeAdvancing", func(t *testing.T) { durable(t, open) })
	t.Run("PositionAfterRestart", func(t *testing.T) { restart(t, open) })
	t.Run("ConcurrentSends", func(t *testing.T) { concurrentSends(t, open) })
	t.Run("PacedByThePlatform", func(t *testing.T) { paced(t, open) })
	t.Run("CancelledSend", func(t *testing.T) { cancelledSend(t, open) })
	t.Run("Status", func(t *testing.T) { status(t, open) })
}

// Outage is implemented by platforms that can stop answering the
// channel's receive loop (their fake refuses it), for the Status check.
type Outage interface {
	Cut(t *testing.T)
}

// status: the channel reports connected once it receives, and, when the
// platform stops answering, connecting with the failure as the reason.
func status(t *testing.T, open Factory) {
	p := open(t)
	c := p.Channel(t, env(t))
	Start(t, c, &Inbox{})
	if o, ok := p.(Outage); ok {
		CheckStatus(t, c, func() { o.Cut(t) })
	} else {
		WaitStatus(t, c, channel.Connected)
	}
}

// env is a fresh pair of folders with a logger into the test's buffer.
func env(t *testing.T) channel.Env {
	t.Helper()
	log, _ := Logger(t)
	return Folders(t, channel.Env{Logger: log})
}

func startStop(t *testing.T, open Factory) {
	p := open(t)
	e := env(t)
	c := p.Channel(t, e)
	if c.Name() == "" {
		t.Error("Name is empty: it is the Channel field of every message")
	}
	stop := Start(t, c, &Inbox{})
	stop()
	// Stopped before it starts: Run returns nil at once, having sent
	// nothing the gateway would wait on.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	errc := make(chan error, 1)
	go func() { errc <- p.Channel(t, e).Run(ctx, &Inbox{}, func() {}) }()
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("Run with an ended context: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("Run with an ended context did not return")
	}
}

func receive(t *testing.T, open Factory) {
	p := open(t)
	c := p.Channel(t, env(t))
	in := &Inbox{}
	Start(t, c, in)
	chat := p.Say(t, "hello from the suite")
	m := in.Wait(t, 1)[0]
	if m.Channel != c.Name() || m.ChatID != chat || !strings.Contains(m.Content, "hello from the suite") || m.ID == "" || m.SenderID == "" {
		t.Errorf("published %+v; want channel %q, chat %q, the text, an id and a sender", m, c.Name(), chat)
	}
}

// prose is n characters of plain words on lines of about 60, nothing a
// Markdown dialect converts.
func prose(n int) string {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		if i > 0 && i%10 == 0 {
			b.WriteString("\n")
		} else if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "word%d", i)
	}
	return b.String()
}

func squeeze(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
}

func sendAndSplit(t *testing.T, open Factory) {
	p := open(t)
	c := p.Channel(t, env(t))
	in := &Inbox{}
	Start(t, c, in)
	chat := p.Say(t, "hi")
	in.Wait(t, 1)
	Send(t, c, bus.Outbound{ChatID: chat, Content: "short answer"})
	if got := p.Sent(t, chat); len(got) != 1 || got[0] != "short answer" {
		t.Fatalf("sent %q, want one message %q", got, "short answer")
	}
	limit := c.Capabilities().MaxMessageLength
	if limit <= 0 {
		return
	}
	long := prose(limit*5/2 + 7)
	Send(t, c, bus.Outbound{ChatID: chat, Content: long})
	parts := p.Sent(t, chat)[1:]
	if len(parts) < 3 {
		t.Fatalf("%d characters sent as %d messages, limit %d", utf8.RuneCountInString(long), len(parts), limit)
	}
	for i, s := range parts {
		if n := utf8.RuneCountInString(s); n > limit {
			t.Errorf("part %d has %d characters, limit %d", i, n, limit)
		}
		if strings.HasSuffix(strings.TrimSpace(s), "word") {
			t.Errorf("part %d ends inside a word: %q", i, s[max(0, len(s)-20):])
		}
	}
	if squeeze(strings.Join(parts, "")) != squeeze(long) {
		t.Error("the parts do not make the text: something was lost, repeated or reordered")
	}
}

// A message the inbox refuses is offered again until it is taken: it
// is neither lost nor published twice.
func durable(t *testing.T, open Factory) {
	p := open(t)
	c := p.Channel(t, env(t))
	in := &Inbox{}
	in.Refuse(2)
	Start(t, c, in)
	p.Say(t, "keep me")
	m := in.Wait(t, 1)
	if len(m) != 1 || !strings.Contains(m[0].Content, "keep me") {
		t.Fatalf("published %+v", m)
	}
	if a := in.Attempts(); a < 3 {
		t.Errorf("%d publishes for a message refused twice, want 3 or more", a)
	}
	if all := in.Messages(); len(all) != 1 {
		t.Errorf("the message was taken %d times", len(all))
	}
}

// A channel stopped while its inbox refuses a message has not moved its
// receive position past it: the next channel on the same state folder
// receives it.
func restart(t *testing.T, open Factory) {
	p := open(t)
	e := env(t)
	refusing := &Inbox{}
	refusing.Refuse(-1)
	stop := Start(t, p.Channel(t, e), refusing)
	chat := p.Say(t, "while the bus is down")
	refusing.WaitAttempts(t, 1)
	stop()
	in := &Inbox{}
	Start(t, p.Channel(t, e), in)
	m := in.Wait(t, 1)[0]
	if !strings.Contains(m.Content, "while the bus is down") || m.ChatID != chat {
		t.Errorf("after a restart the channel published %+v", m)
	}
}

// Sends to one chat from many goroutines (the gateway's dispatcher and
// its progress updates) all arrive: the channel paces them under the
// platform's limits rather than failing.
func concurrentSends(t *testing.T, open Factory) {
	p := open(t)
	c := p.Channel(t, env(t))
	in := &Inbox{}
	Start(t, c, in)
	chat := p.Say(t, "hi")
	in.Wait(t, 1)
	const n = 8
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := c.Send(ctx, bus.Outbound{Channel: c.Name(), ChatID: chat, Kind: bus.Message, Content: fmt.Sprint("answer ", i)}); err != nil {
				t.Errorf("send %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	got := p.Sent(t, chat)
	seen := map[string]bool{}
	for _, s := range got {
		seen[s] = true
	}
	for i := range n {
		if !seen[fmt.Sprint("answer ", i)] {
			t.Errorf("answer %d is missing from %q", i, got)
		}
	}
	if len(got) != n {
		t.Errorf("%d messages for %d sends", len(got), n)
	}
}

// A send the platform refuses as too many is either retried by the
// channel or returned as a *channel.RetryAfter with the wait the platform
// asked for; sent again after it, it arrives once.
func paced(t *testing.T, open Factory) {
	p := open(t)
	th, ok := p.(Throttler)
	if !ok {
		t.Skip("the platform's fake cannot refuse a send")
	}
	c := p.Channel(t, env(t))
	in := &Inbox{}
	Start(t, c, in)
	chat := p.Say(t, "hi")
	in.Wait(t, 1)
	th.Throttle(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := bus.Outbound{Channel: c.Name(), ChatID: chat, Kind: bus.Message, Content: "paced answer"}
	_, err := c.Send(ctx, m)
	var ra *channel.RetryAfter
	switch {
	case err == nil:
	case errors.As(err, &ra):
		if ra.After <= 0 {
			t.Errorf("RetryAfter asks to wait %v", ra.After)
		}
		time.Sleep(ra.After)
		if _, err := c.Send(ctx, m); err != nil {
			t.Fatalf("sent again after the wait: %v", err)
		}
	default:
		t.Fatalf("a send refused as too many: %v, want nil or a *channel.RetryAfter", err)
	}
	n := 0
	for _, s := range p.Sent(t, chat) {
		if s == "paced answer" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("the paced answer arrived %d times, want once", n)
	}
}

// A send whose context has ended fails at once and delivers nothing.
func cancelledSend(t *testing.T, open Factory) {
	p := open(t)
	c := p.Channel(t, env(t))
	in := &Inbox{}
	Start(t, c, in)
	chat := p.Say(t, "hi")
	in.Wait(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.Send(ctx, bus.Outbound{Channel: c.Name(), ChatID: chat, Kind: bus.Message, Content: "too late"})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Send with an ended context returned no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Send with an ended context did not return")
	}
	if got := p.Sent(t, chat); len(got) != 0 {
		t.Errorf("sent %q after the context ended", got)
	}
}
