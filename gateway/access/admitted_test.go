package access

import "testing"

// TestAdmitted: the question a channel asks before it downloads media
// answers as Authorize would for allowed and paired senders, refuses
// strangers and unmentioned group chatter, and issues no pairing code:
// the stranger's first message still gets its code.
func TestAdmitted(t *testing.T) {
	c, _ := newChecker(t)
	stranger := Request{Entry: Channel, Channel: "telegram", SenderID: "999|mallory", ChatID: "999"}
	for _, tc := range []struct {
		r    Request
		want bool
	}{
		{Request{Entry: Channel, Channel: "telegram", SenderID: "111|alice", ChatID: "111"}, true},
		{stranger, false},
		{Request{Entry: Channel, Channel: "telegram", SenderID: "111|alice", ChatID: "-5", Group: true}, false},
		{Request{Entry: Channel, Channel: "telegram", SenderID: "111|alice", ChatID: "-5", Group: true, Mentioned: true}, true},
		{Request{Entry: Channel, Channel: "email", SenderID: "someone@else.com", ChatID: "someone@else.com"}, false},
		{Request{Entry: Channel, Channel: "nowhere", SenderID: "111", ChatID: "111"}, false},
		{Request{Entry: Web, Authenticated: true}, true},
	} {
		if got := c.Admitted(tc.r); got != tc.want {
			t.Errorf("%+v: %v, want %v", tc.r, got, tc.want)
		}
	}
	c.mu.Lock()
	c.reloadLocked()
	pending := c.state.Pending
	c.mu.Unlock()
	if len(pending) != 0 {
		t.Fatalf("Admitted issued a pairing code: %+v", pending)
	}
	d := c.Authorize(t.Context(), stranger)
	if d.Verdict != Pair || !d.NewCode {
		t.Fatalf("the stranger's first message: %+v", d)
	}
	if _, err := c.Approve(t.Context(), d.Code); err != nil {
		t.Fatal(err)
	}
	if !c.Admitted(stranger) {
		t.Error("a paired sender is not admitted")
	}
}
