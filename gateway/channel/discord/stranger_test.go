package discord

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/channeltest"
	"github.com/nbots/nb/gateway/channel/discord/discordtest"
)

// TestStrangersFilesNeverFetched: a direct message's files from a sender
// the gateway does not let in are not downloaded; the allowed sender's
// are.
func TestStrangersFilesNeverFetched(t *testing.T) {
	fake := newFake(t)
	ws := t.TempDir()
	c, err := New(Config{Token: token, APIBase: fake.URL}, channel.Env{Workspace: ws, StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	in := &channeltest.Inbox{Admit: func(m bus.Inbound) bool { return m.SenderID == alice.ID }}
	stop := channeltest.Start(t, c, in)
	defer stop()
	fake.PostFiles("", "200000000000000009", bob, "take this", discordtest.File{Name: "big.bin", Data: []byte("junk")})
	fake.PostFiles("", "200000000000000001", alice, "mine", discordtest.File{Name: "notes.txt", Data: []byte("notes")})
	got := in.Wait(t, 2)
	byText := map[string]bus.Inbound{}
	for _, m := range got {
		byText[m.SenderID] = m
	}
	if m := byText[bob.ID]; len(m.Media) != 0 || m.Content != "take this" {
		t.Errorf("the stranger's message: %+v", m)
	}
	if m := byText[alice.ID]; len(m.Media) != 1 {
		t.Errorf("the allowed sender's message: %+v", m)
	}
	entries, _ := os.ReadDir(filepath.Join(ws, "media", "discord"))
	if len(entries) != 1 || entries[0].Name() == "" {
		t.Errorf("stored: %v", entries)
	}
}
