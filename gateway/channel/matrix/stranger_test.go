package matrix

import (
	"testing"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/channeltest"
)

// TestStrangersMediaNeverFetched: a file in a direct chat from a sender
// the gateway does not let in is not downloaded; the allowed sender's is.
func TestStrangersMediaNeverFetched(t *testing.T) {
	fake := newFake(t)
	env := channeltest.Folders(t, channel.Env{})
	// Both may invite the bot (a stranger reaches it in a room in
	// practice); the gateway's answer (Admit) is what keeps bob's file
	// off the disk.
	c, _ := newChannel(t, fake, env, Config{MaxMediaBytes: 1000, AllowFrom: []string{alice, bob}})
	in := &channeltest.Inbox{Admit: func(m bus.Inbound) bool { return m.SenderID == alice }}
	stop := channeltest.Start(t, c, in)
	defer stop()
	strange := direct(t, fake, bob)
	mine := direct(t, fake, alice)
	junk := fake.AddMedia([]byte("junk"))
	fake.Post(strange, bob, "m.room.message", map[string]any{"msgtype": "m.file", "body": "big.bin", "url": junk, "info": map[string]any{"size": 4}})
	fake.Post(mine, alice, "m.room.message", map[string]any{"msgtype": "m.file", "body": "notes.txt", "url": junk, "info": map[string]any{"size": 4}})
	got := in.Wait(t, 2)
	for _, m := range got {
		if want := map[bool]int{true: 1, false: 0}[m.SenderID == alice]; len(m.Media) != want {
			t.Errorf("%s's message: %+v", m.SenderID, m)
		}
	}
	if n := fake.Calls("download"); n != 1 {
		t.Errorf("%d downloads: only the allowed sender's file may be fetched", n)
	}
}
