package gatewayrun

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/nbots/nb/gateway/access"
	gwsession "github.com/nbots/nb/gateway/session"
	"github.com/nbots/nb/state"
)

// The heartbeat answers into the owner's most recent chat, never into a
// guest's that was written to later.
func TestHeartbeatTargetIsTheOwners(t *testing.T) {
	dir := t.TempDir()
	sm, err := gwsession.NewManager(filepath.Join(dir, "sessions"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sm.Close() })
	pairings := &access.FilePairings{Path: filepath.Join(dir, "pairing.json")}
	checker := &access.Checker{Pairings: pairings, Channels: map[string]access.ChannelRules{"telegram": {AllowFrom: []string{"1"}}}}
	pairings.Update(t.Context(), func(b *access.Book) {
		b.Approved = append(b.Approved, access.Approval{Channel: "telegram", SenderID: "2", ChatID: "2"})
	})
	for _, key := range []string{"telegram:1", "telegram:2"} {
		s, err := sm.Get(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Append(t.Context(), state.Event{Who: state.RoleUser, Message: "hi"}); err != nil {
			t.Fatal(err)
		}
		if err := s.Sync(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // the guest's session is the newer
	}
	ch, chat := heartbeatTarget(t.Context(), sm, checker)
	if ch != "telegram" || chat != "1" {
		t.Fatalf("the heartbeat answers into %s:%s, want the owner's telegram:1", ch, chat)
	}
}
