package email

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/bus/jetstream"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/internal/natstest"
)

// Two replicas with their own state folders share the mailbox position
// through the bus: the replica elected after the first one stopped
// resumes at the UID the first saved. Alone with its own (empty) folder
// it would read only the mail arriving from then on, skipping what came
// in between; with a stale one it would read again mail already
// answered, which an IMAP server keeps for ever, past any duplicate
// window.
func TestReplicasShareTheMailboxPosition(t *testing.T) {
	s := newServers(t)
	ns := natstest.Start(t)
	replica := func(id string) channel.Env {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		b, err := jetstream.Dial(ctx, ns.URL(), id, jetstream.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b.Close() })
		p, err := b.Positions(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return channel.Env{StateDir: t.TempDir(), OpenPosition: func(ctx context.Context, name string, file channel.FileCursor) (channel.Cursor, error) {
			return p.Open(ctx, name+".mailbox-hash", file)
		}}
	}
	s.deliver(t, "old@example.org", "before", "mail from before the first start is not answered")
	h := start(t, config(s), replica("a"))
	s.deliver(t, "a@example.org", "one", "1")
	h.in.Wait(t, 1)
	h.stop()
	s.deliver(t, "a@example.org", "two", "2")
	s.deliver(t, "a@example.org", "three", "3")
	h2 := start(t, config(s), replica("b"))
	h2.in.Wait(t, 2)
	time.Sleep(200 * time.Millisecond)
	if got := h2.in.Messages(); len(got) != 2 || !strings.Contains(got[0].Content, "two") || !strings.Contains(got[1].Content, "three") {
		t.Errorf("the second replica published %+v", got)
	}
}
