package telegram

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channel/channeltest"
	"github.com/nbots/nb/gateway/channel/telegram/botapi"
)

// TestStrangersMediaNeverFetched: a stranger's twenty documents (the
// probe sent 20 × 20 MB) are neither asked for nor downloaded (the
// webhook takes the same path as polling); the allowed sender's document
// is. Before,
// every document was downloaded and kept before the access check.
func TestStrangersMediaNeverFetched(t *testing.T) {
	fake := newFake(t)
	env := channeltest.Folders(t, channel.Env{})
	c, _ := newChannel(t, fake, env, Config{MaxMediaBytes: 1 << 20})
	in := &channeltest.Inbox{Admit: func(m bus.Inbound) bool { return m.SenderID == "42|alice" }}
	stop := channeltest.Start(t, c, in)
	defer stop()
	doc := fake.AddFile([]byte(strings.Repeat("x", 1000)))
	for i := range 20 {
		fake.Post(botapi.Message{From: &bob, Chat: botapi.Chat{ID: 43, Type: botapi.Private}, Caption: "take this",
			Document: &botapi.Document{FileID: doc, FileUniqueID: "u" + string(rune('a'+i)), FileName: "big.bin", FileSize: 1000}})
	}
	fake.Post(botapi.Message{From: &alice, Chat: botapi.Chat{ID: 42, Type: botapi.Private}, Document: &botapi.Document{FileID: doc, FileUniqueID: "mine", FileName: "notes.txt", FileSize: 1000}})
	got := in.Wait(t, 21)
	for _, m := range got[:20] {
		if len(m.Media) != 0 || m.Content != "take this" {
			t.Fatalf("a stranger's message: %+v", m)
		}
	}
	if len(got[20].Media) != 1 {
		t.Fatalf("the allowed sender's document: %+v", got[20])
	}
	if n := fake.Calls("getFile"); n != 1 {
		t.Errorf("getFile called %d times: only the allowed sender's file may be asked for", n)
	}
	var stored []string
	filepath.WalkDir(filepath.Join(env.Workspace, "media"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			stored = append(stored, filepath.Base(p))
		}
		return nil
	})
	if len(stored) != 1 || !strings.Contains(stored[0], "mine") {
		t.Errorf("stored media: %v", stored)
	}
}
