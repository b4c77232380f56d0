package access

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func newChecker(t *testing.T) (*Checker, *time.Time) {
	t.Helper()
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	c := &Checker{
		Pairings: &FilePairings{Path: filepath.Join(t.TempDir(), "pairing.json")},
		Now:      func() time.Time { return now },
		Channels: map[string]ChannelRules{
			"telegram": {AllowFrom: []string{"111", "bob", "444|carol"}},
			"discord":  {AllowFrom: []string{"discord:900"}, GroupPolicy: "open"},
			"email":    {AllowFrom: []string{"allow@email.com"}, NoPairing: true},
			"slack":    {AllowFrom: nil},
			"matrix":   {AllowFrom: []string{"*"}},
		},
	}
	return c, &now
}

// file is the path of c's pairing file.
func file(c *Checker) string { return c.Pairings.(*FilePairings).Path }

// TestAuthorize is the table of every entry point.
func TestAuthorize(t *testing.T) {
	c, _ := newChecker(t)
	// An allowed sender writes from a chat: the assistant may send there later.
	if d := c.Authorize(t.Context(), Request{Entry: Channel, Channel: "telegram", SenderID: "111|alice", ChatID: "555"}); d.Verdict != Allow {
		t.Fatal(d)
	}
	// A guest (paired) writes from their chat.
	if _, err := c.Pairings.Update(t.Context(), func(b *Book) {
		b.Approved = append(b.Approved, Approval{Channel: "telegram", SenderID: "888|gus", ChatID: "888"})
	}); err != nil {
		t.Fatal(err)
	}
	if d := c.Authorize(t.Context(), Request{Entry: Channel, Channel: "telegram", SenderID: "888|gus", ChatID: "888"}); d.Verdict != Allow || d.Role != Guest {
		t.Fatal(d)
	}
	for _, tc := range []struct {
		name string
		r    Request
		want Verdict
		role Role // checked when Allow
	}{
		// channels
		{"telegram id|username, id part", Request{Entry: Channel, Channel: "telegram", SenderID: "111|zed"}, Allow, Owner},
		{"telegram id|username, username part", Request{Entry: Channel, Channel: "telegram", SenderID: "222|bob"}, Allow, Owner},
		{"telegram whole id|username entry", Request{Entry: Channel, Channel: "telegram", SenderID: "444|carol"}, Allow, Owner},
		{"telegram whole entry is not a part", Request{Entry: Channel, Channel: "telegram", SenderID: "444|dan"}, Pair, ""},
		// Telegram identities: digits match the id only, a name the username only, and the username is never split.
		{"telegram digits entry is not a username", Request{Entry: Channel, Channel: "telegram", SenderID: "999|111"}, Pair, ""},
		{"telegram name entry is not an id", Request{Entry: Channel, Channel: "telegram", SenderID: "bob"}, Pair, ""},
		{"telegram @name entry", Request{Entry: Channel, Channel: "telegram", SenderID: "223|Bob"}, Allow, Owner},
		{"telegram | in a username is not split", Request{Entry: Channel, Channel: "telegram", SenderID: "999|x|111"}, Pair, ""},
		{"telegram | in a username is not split (name)", Request{Entry: Channel, Channel: "telegram", SenderID: "999|x|bob"}, Pair, ""},
		{"telegram id alone", Request{Entry: Channel, Channel: "telegram", SenderID: "111"}, Allow, Owner},
		{"telegram unknown", Request{Entry: Channel, Channel: "telegram", SenderID: "333|eve"}, Pair, ""},
		{"telegram group, no mention", Request{Entry: Channel, Channel: "telegram", SenderID: "111|alice", Group: true}, Ignore, ""},
		{"telegram group, mentioned", Request{Entry: Channel, Channel: "telegram", SenderID: "111|alice", Group: true, Mentioned: true}, Allow, Owner},
		{"telegram group, unknown, mentioned: no pairing in groups", Request{Entry: Channel, Channel: "telegram", SenderID: "9|x", Group: true, Mentioned: true}, Deny, ""},
		{"channel-prefixed entry", Request{Entry: Channel, Channel: "discord", SenderID: "900"}, Allow, Owner},
		{"open groups", Request{Entry: Channel, Channel: "discord", SenderID: "900", Group: true}, Allow, Owner},
		{"the | split is Telegram's only", Request{Entry: Channel, Channel: "email", SenderID: "attacker|allow@email.com"}, Deny, ""},
		{"email exact", Request{Entry: Channel, Channel: "email", SenderID: "allow@email.com"}, Allow, Owner},
		{"empty allowFrom admits nobody (pairing)", Request{Entry: Channel, Channel: "slack", SenderID: "U1"}, Pair, ""},
		{"star admits a guest", Request{Entry: Channel, Channel: "matrix", SenderID: "@x:y"}, Allow, Guest},
		{"paired guest", Request{Entry: Channel, Channel: "telegram", SenderID: "888|gus", ChatID: "888"}, Allow, Guest},
		{"unconfigured channel", Request{Entry: Channel, Channel: "qq", SenderID: "1"}, Deny, ""},
		{"empty sender", Request{Entry: Channel, Channel: "matrix", SenderID: ""}, Deny, ""},
		// web chat and terminal
		{"web authenticated", Request{Entry: Web, ChatID: "a", Authenticated: true}, Allow, Owner},
		{"web unauthenticated", Request{Entry: Web, ChatID: "a"}, Deny, ""},
		{"terminal", Request{Entry: Terminal, Channel: "cli", ChatID: "direct"}, Allow, Owner},
		// cron, heartbeat, sub-agents, message tool: destinations
		{"cron to a chat an allowed sender used", Request{Entry: Cron, Channel: "telegram", ChatID: "555"}, Allow, Owner},
		{"cron to a stranger's chat", Request{Entry: Cron, Channel: "telegram", ChatID: "666"}, Deny, ""},
		{"cron to the terminal", Request{Entry: Cron, Channel: "cli", ChatID: "direct"}, Allow, Owner},
		{"heartbeat to an allowFrom id", Request{Entry: Heartbeat, Channel: "telegram", ChatID: "bob"}, Allow, Owner},
		{"heartbeat nowhere", Request{Entry: Heartbeat}, Deny, ""},
		{"subagent back to its web session", Request{Entry: Subagent, Channel: "web", ChatID: "s1"}, Allow, Owner},
		{"subagent to a stranger", Request{Entry: Subagent, Channel: "slack", ChatID: "U1"}, Deny, ""},
		{"message tool to a stranger", Request{Entry: MessageTool, Channel: "telegram", ChatID: "777"}, Deny, ""},
		{"message tool to everyone's channel needs a known chat", Request{Entry: MessageTool, Channel: "matrix", ChatID: "!room"}, Deny, ""},
		{"message tool to an unconfigured channel", Request{Entry: MessageTool, Channel: "qq", ChatID: "1"}, Deny, ""},
		{"cron to a guest's chat", Request{Entry: Cron, Channel: "telegram", ChatID: "888"}, Deny, ""},
		{"heartbeat to a guest's chat", Request{Entry: Heartbeat, Channel: "telegram", ChatID: "888"}, Deny, ""},
		{"message tool to a guest's chat", Request{Entry: MessageTool, Channel: "telegram", ChatID: "888"}, Allow, Guest},
		{"subagent back to a guest's chat", Request{Entry: Subagent, Channel: "telegram", ChatID: "888"}, Allow, Guest},
		{"unknown entry", Request{Entry: "sdk"}, Deny, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if d := c.Authorize(t.Context(), tc.r); d.Verdict != tc.want || (tc.want == Allow && d.Role != tc.role) {
				t.Fatalf("%+v: got %+v, want verdict %v role %q", tc.r, d, tc.want, tc.role)
			}
		})
	}
}

func TestPairing(t *testing.T) {
	c, now := newChecker(t)
	eve := Request{Entry: Channel, Channel: "telegram", SenderID: "333|eve", ChatID: "333"}
	d := c.Authorize(t.Context(), eve)
	if d.Verdict != Pair || !d.NewCode || !regexp.MustCompile(`^[A-Z2-9]{4}-[A-Z2-9]{4}$`).MatchString(d.Code) {
		t.Fatalf("%+v", d)
	}
	// Told once: the second message gets the same code, not announced again.
	if d2 := c.Authorize(t.Context(), eve); d2.Verdict != Pair || d2.NewCode || d2.Code != d.Code {
		t.Fatalf("%+v", d2)
	}
	other := c.Authorize(t.Context(), Request{Entry: Channel, Channel: "slack", SenderID: "U2", ChatID: "D2"})
	if other.Code == d.Code {
		t.Fatal("codes are not unique")
	}
	// Another process (nb gateway pair) approves through the store.
	cli := &Checker{Pairings: &FilePairings{Path: file(c)}, Now: c.Now}
	if _, err := cli.Approve(t.Context(), "nope-nope"); err == nil || !strings.Contains(err.Error(), "no pairing code NOPE-NOPE") {
		t.Fatal(err)
	}
	a, err := cli.Approve(t.Context(), strings.ToLower(d.Code))
	if err != nil || a.SenderID != "333|eve" {
		t.Fatal(a, err)
	}
	if _, err := cli.Approve(t.Context(), d.Code); err == nil {
		t.Fatal("a code approved twice")
	}
	// The running gateway sees it without a restart.
	*now = now.Add(time.Second) // a different mtime is not needed: size changes too
	if d := c.Authorize(t.Context(), eve); d.Verdict != Allow {
		t.Fatalf("%+v", d)
	}
	if d := c.Authorize(t.Context(), Request{Entry: MessageTool, Channel: "telegram", ChatID: "333"}); d.Verdict != Allow {
		t.Fatalf("a paired chat is a destination: %+v", d)
	}
	// Expired codes cannot be approved; issuing a code keeps approvals.
	*now = now.Add(CodeLifetime + time.Minute)
	if _, err := cli.Approve(t.Context(), other.Code); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Fatal(err)
	}
	if d := c.Authorize(t.Context(), Request{Entry: Channel, Channel: "slack", SenderID: "U3", ChatID: "D3"}); d.Verdict != Pair || !d.NewCode {
		t.Fatal(d)
	}
	if len(cli.Approved()) != 1 {
		t.Fatal(cli.Approved())
	}
}

func TestCorruptedStoreResets(t *testing.T) {
	c, _ := newChecker(t)
	var warned string
	c.Pairings.(*FilePairings).Warn = func(s string) { warned = s }
	os.WriteFile(file(c), []byte("{not json"), 0o600)
	if d := c.Authorize(t.Context(), Request{Entry: Channel, Channel: "telegram", SenderID: "4|z", ChatID: "4"}); d.Verdict != Pair {
		t.Fatal(d)
	}
	if !strings.Contains(warned, "not valid JSON") {
		t.Fatal(warned)
	}
}

// stalePairings is a shared store whose copy lags behind: Read returns
// what it held before another replica's change.
type stalePairings struct {
	*FilePairings
	copy Book
}

func (s *stalePairings) Read() Book { return s.copy }

// A sender paired, or given a code, by another replica since this one's
// copy was read is not given a new code.
func TestChangedMeanwhile(t *testing.T) {
	c, now := newChecker(t)
	store := &stalePairings{FilePairings: &FilePairings{Path: file(c)}}
	c.Pairings = store
	if _, err := store.Update(t.Context(), func(b *Book) {
		b.Approved = append(b.Approved, Approval{Channel: "telegram", SenderID: "333|eve", ChatID: "333"})
		b.Pending = append(b.Pending, Pending{Code: "ABCD-EFGH", Channel: "slack", SenderID: "U9", Expires: now.Add(time.Minute)})
	}); err != nil {
		t.Fatal(err)
	}
	if d := c.Authorize(t.Context(), Request{Entry: Channel, Channel: "telegram", SenderID: "333|eve", ChatID: "333"}); d.Verdict != Allow {
		t.Fatalf("paired meanwhile: %+v", d)
	}
	if d := c.Authorize(t.Context(), Request{Entry: Channel, Channel: "slack", SenderID: "U9", ChatID: "D9"}); d.Verdict != Pair || d.Code != "ABCD-EFGH" || d.NewCode {
		t.Fatalf("given a code meanwhile: %+v", d)
	}
	if n := len(store.FilePairings.Read().Pending); n != 1 {
		t.Fatalf("%d codes waiting, want 1", n)
	}
}

// Merge adds what the book lacks, once.
func TestMerge(t *testing.T) {
	var b Book
	b.Approved = []Approval{{Channel: "telegram", SenderID: "1"}}
	file := Book{
		Approved: []Approval{{Channel: "telegram", SenderID: "1"}, {Channel: "telegram", SenderID: "2"}, {Channel: "slack", SenderID: "1"}},
		Pending:  []Pending{{Code: "AAAA-BBBB"}},
	}
	if n := b.Merge(file); n != 2 || len(b.Approved) != 3 || len(b.Pending) != 1 {
		t.Fatalf("merged %d: %+v", n, b)
	}
	if n := b.Merge(file); n != 0 || len(b.Approved) != 3 || len(b.Pending) != 1 {
		t.Fatalf("merged %d again: %+v", n, b)
	}
}

// Strangers by the thousand do not grow the book past MaxPending codes:
// the oldest go, and the newest can still be approved.
func TestPendingBounded(t *testing.T) {
	c, now := newChecker(t)
	c.Pairings = &FilePairings{} // in memory: a thousand file writes are slow under -race
	var last Decision
	for i := range MaxPending + 50 {
		*now = now.Add(time.Millisecond)
		last = c.Authorize(t.Context(), Request{Entry: Channel, Channel: "slack", SenderID: fmt.Sprint("U", i), ChatID: "D"})
		if last.Verdict != Pair || !last.NewCode {
			t.Fatalf("stranger %d: %+v", i, last)
		}
	}
	if n := len(c.Pairings.Read().Pending); n != MaxPending {
		t.Fatalf("%d codes waiting", n)
	}
	if _, err := c.Approve(t.Context(), last.Code); err != nil {
		t.Fatal(err)
	}
}
