// Package access decides who may talk to the gateway's assistant and
// where it may send: one function, Authorize, that every entry point
// crosses (channel messages, the web chat, cron jobs, the heartbeat,
// sub-agents, the message tool's targets, the terminal). It denies by
// default: a channel's allowFrom lists exact identities, an empty list
// admits nobody, and an unknown sender of a direct message gets a pairing
// code that the owner approves (nb gateway pair CODE, or /pair CODE from
// an allowed chat). Approvals live in a store outside the workspace, where
// the assistant's own tools cannot write.
package access

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nbots/nb/internal/atomicfile"
)

// Entry names an entry point.
type Entry string

// Entry points.
const (
	// Channel is a message from a chat platform.
	Channel Entry = "channel"
	// Web is the web chat and the websocket of the gateway's listener.
	Web Entry = "web"
	// Terminal is nb gateway chat, run by the owner on this machine.
	Terminal Entry = "terminal"
	// Cron is a cron job's turn and its delivery.
	Cron Entry = "cron"
	// Heartbeat is the heartbeat's turn and its delivery.
	Heartbeat Entry = "heartbeat"
	// Subagent is a sub-agent's result going back to its session.
	Subagent Entry = "subagent"
	// MessageTool is the message tool sending to a chat.
	MessageTool Entry = "message_tool"
)

// Request is what is to be authorised.
type Request struct {
	Entry Entry
	// Channel, SenderID and ChatID say who writes (Channel) or where the
	// message goes (the other entries).
	Channel, SenderID, ChatID string
	// Group is true for a message in a group chat; Mentioned when it
	// mentions the bot.
	Group, Mentioned bool
	// Authenticated is true when the listener authenticated the request
	// (Web: a loopback request from the gateway's own page, or a token).
	Authenticated bool
}

// Role is what an allowed sender may do. The owner is a sender a
// channel's allowFrom names (and whoever uses the terminal or the
// authenticated web chat); a guest is a sender the owner paired, or one
// admitted by allowFrom's "*". The gateway gives a guest's turn fewer
// tools and fewer files (see package gateway), sends cron and heartbeat
// answers to the owner's chats only, and lets only the owner approve
// pairing codes.
type Role string

// Roles.
const (
	Owner Role = "owner"
	Guest Role = "guest"
)

// Verdict is the decision.
type Verdict int

// Verdicts.
const (
	// Deny: nothing is answered, nothing is sent.
	Deny Verdict = iota
	// Allow: the turn runs, or the message is sent.
	Allow
	// Ignore: a group message that does not concern the bot.
	Ignore
	// Pair: an unknown sender of a direct message; Decision.Code is its
	// pairing code, Decision.NewCode says whether to tell it (once).
	Pair
)

// Decision is Authorize's answer.
type Decision struct {
	Verdict Verdict
	// Reason says why, for the log.
	Reason string
	// Code is the pairing code (Pair); NewCode is true the first time.
	Code    string
	NewCode bool
	// Role is the sender's role (Allow on Channel, Web, Terminal), or the
	// role of whoever the destination's chat belongs to (Allow on the
	// other entries).
	Role Role
}

// ChannelRules are a channel's access settings.
type ChannelRules struct {
	// AllowFrom are the owner's identities: "<id>", or "<channel>:<id>";
	// "*" admits everyone, as a guest.
	AllowFrom []string
	// GroupPolicy is "mention" (the default: answer in groups when
	// mentioned) or "open" (answer every group message).
	GroupPolicy string
	// NoPairing turns pairing codes off (email: a code would go to
	// whoever forged a From).
	NoPairing bool
}

// CodeLifetime is how long a pairing code can be approved.
const CodeLifetime = 10 * time.Minute

// MaxPending is how many pairing codes wait at most: past it, a new code
// replaces the oldest.
const MaxPending = 1000

// Checker holds the rules and the pairing store.
type Checker struct {
	// Channels are the rules of each channel by name.
	Channels map[string]ChannelRules
	// Pairings keeps the pairing codes and approvals: a gateway alone
	// keeps them in its file (*FilePairings, which without a Path keeps
	// them in memory), replicas in a store they share (package
	// gateway/bus/jetstream). It must be set.
	Pairings Pairings
	// Now is the clock (tests); nil is time.Now.
	Now func() time.Time

	mu       sync.Mutex
	state    Book
	recorded map[string]Role // destinations allowed senders wrote from, and whose
}

// Book is what a pairing store holds: the codes waiting for the owner and
// the senders the owner approved.
type Book struct {
	Pending  []Pending  `json:"pending"`
	Approved []Approval `json:"approved"`
}

// Pairings keeps the Book: FilePairings for one gateway, or a store that
// replicas share (package gateway/bus/jetstream).
type Pairings interface {
	// Read returns the book as it is now. The Checker calls it for every
	// message of a sender that allowFrom does not name, so it must be
	// cheap (a copy in memory, kept current). The caller does not modify
	// what it returns.
	Read() Book
	// Update applies change to the latest book and stores the result
	// atomically, and returns it. change may run more than once (when
	// another process changed the book meanwhile), each time on a fresh
	// copy. ctx bounds the store's I/O.
	Update(ctx context.Context, change func(*Book)) (Book, error)
	// String names the store, for messages.
	String() string
}

// Pending is a pairing code waiting for the owner.
type Pending struct {
	Code     string    `json:"code"`
	Channel  string    `json:"channel"`
	SenderID string    `json:"sender_id"`
	ChatID   string    `json:"chat_id"`
	Expires  time.Time `json:"expires"`
}

// Approval is a sender the owner paired.
type Approval struct {
	Channel  string    `json:"channel"`
	SenderID string    `json:"sender_id"`
	ChatID   string    `json:"chat_id"`
	At       time.Time `json:"at"`
}

func (c *Checker) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

// Authorize is the one check of every entry point. ctx bounds the
// pairing store's I/O (a code given to an unknown sender).
func (c *Checker) Authorize(ctx context.Context, r Request) Decision {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Entry == Channel {
		return c.channelLocked(ctx, r)
	}
	return c.entryLocked(r)
}

// entryLocked is Authorize for the entry points other than Channel,
// which read no store.
func (c *Checker) entryLocked(r Request) Decision {
	switch r.Entry {
	case Terminal:
		return Decision{Verdict: Allow, Reason: "the owner's terminal", Role: Owner}
	case Web:
		if r.Authenticated {
			return Decision{Verdict: Allow, Reason: "the gateway's web chat (loopback or token)", Role: Owner}
		}
		return Decision{Reason: "an unauthenticated web request"}
	case Cron, Heartbeat, Subagent, MessageTool:
		role := c.destinationLocked(r.Channel, r.ChatID)
		switch {
		case role == "":
			return Decision{Reason: fmt.Sprintf("%s:%s is not a chat of an allowed sender", r.Channel, r.ChatID)}
		case role != Owner && (r.Entry == Cron || r.Entry == Heartbeat):
			// The owner's jobs and HEARTBEAT.md tasks, private notes
			// included, are answered to the owner alone.
			return Decision{Reason: fmt.Sprintf("%s:%s is a guest's chat: %s answers go to the owner's chats only", r.Channel, r.ChatID, r.Entry)}
		}
		return Decision{Verdict: Allow, Reason: "an allowed destination", Role: role}
	}
	return Decision{Reason: "an unknown entry point"}
}

func (c *Checker) channelLocked(ctx context.Context, r Request) Decision {
	rules, ok := c.Channels[r.Channel]
	if !ok {
		return Decision{Reason: "channel " + r.Channel + " is not configured"}
	}
	if r.SenderID == "" {
		return Decision{Reason: "a message without a sender"}
	}
	if r.Group && !r.Mentioned && rules.GroupPolicy != "open" {
		return Decision{Verdict: Ignore, Reason: "a group message without a mention"}
	}
	ok, star := match(r.Channel, rules.AllowFrom, r.SenderID)
	switch {
	case ok && !star:
		c.record(r.Channel, r.ChatID, Owner)
		return Decision{Verdict: Allow, Reason: "in allowFrom", Role: Owner}
	case ok:
		c.record(r.Channel, r.ChatID, Guest)
		return Decision{Verdict: Allow, Reason: `allowFrom admits everyone ("*")`, Role: Guest}
	}
	c.reloadLocked()
	for _, a := range c.state.Approved {
		if a.Channel == r.Channel && a.SenderID == r.SenderID {
			c.record(r.Channel, r.ChatID, Guest)
			return Decision{Verdict: Allow, Reason: "paired", Role: Guest}
		}
	}
	if r.Group || rules.NoPairing {
		return Decision{Reason: "not in allowFrom"}
	}
	now := c.now()
	for _, p := range c.state.Pending {
		if p.Channel == r.Channel && p.SenderID == r.SenderID && now.Before(p.Expires) {
			return Decision{Verdict: Pair, Code: p.Code, Reason: "waiting for pairing"}
		}
	}
	code := c.newCodeLocked()
	given, paired := "", false
	err := c.updateLocked(ctx, func(s *Book) error {
		// Another process may have paired the sender, or given them a
		// code (a replica that handled their previous message), since
		// the book was read: that stays.
		given, paired = "", false
		for _, a := range s.Approved {
			if a.Channel == r.Channel && a.SenderID == r.SenderID {
				paired = true
				return nil
			}
		}
		for _, p := range s.Pending {
			if p.Channel == r.Channel && p.SenderID == r.SenderID && now.Before(p.Expires) {
				given = p.Code
				return nil
			}
		}
		s.Pending = append(s.Pending, Pending{Code: code, Channel: r.Channel, SenderID: r.SenderID, ChatID: r.ChatID, Expires: now.Add(CodeLifetime)})
		if n := len(s.Pending) - MaxPending; n > 0 {
			// Strangers writing by the thousand: the oldest codes go,
			// so that the book stays small (a bus's value is at most
			// 1 MB) and the owner can still approve.
			sort.SliceStable(s.Pending, func(i, j int) bool { return s.Pending[i].Expires.Before(s.Pending[j].Expires) })
			s.Pending = slices.Delete(s.Pending, 0, n)
		}
		return nil
	})
	if err != nil {
		return Decision{Reason: "pairing store: " + err.Error()}
	}
	if paired {
		c.record(r.Channel, r.ChatID, Guest)
		return Decision{Verdict: Allow, Reason: "paired", Role: Guest}
	}
	if given != "" {
		return Decision{Verdict: Pair, Code: given, Reason: "waiting for pairing"}
	}
	return Decision{Verdict: Pair, Code: code, NewCode: true, Reason: "an unknown sender: pairing code issued"}
}

// record remembers a chat an allowed sender wrote from, and whose it is:
// the assistant may send there later (cron, heartbeat, message tool). A
// chat the owner wrote from stays the owner's (a group shared with a
// guest).
func (c *Checker) record(channel, chat string, role Role) {
	if c.recorded == nil {
		c.recorded = map[string]Role{}
	}
	k := channel + "\x00" + chat
	if c.recorded[k] != Owner {
		c.recorded[k] = role
	}
}

// RoleOf is whose chat channel:chat is: Owner, Guest, or "" when the
// assistant may not send there.
func (c *Checker) RoleOf(channel, chat string) Role {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.destinationLocked(channel, chat)
}

// destinationLocked tells whether the assistant may send to chat, and
// whose chat it is: the local chats and a chat whose id an allowFrom
// entry names are the owner's; a chat an allowed sender wrote from is
// that sender's; a chat an approval names is a guest's.
func (c *Checker) destinationLocked(channel, chat string) Role {
	switch channel {
	case "cli", "web", "system":
		if chat != "" {
			return Owner
		}
		return ""
	}
	if channel == "" || chat == "" {
		return ""
	}
	rules, configured := c.Channels[channel]
	recorded, wrote := c.recorded[channel+"\x00"+chat]
	switch {
	case recorded == Owner || (configured && namesChat(channel, rules.AllowFrom, chat)):
		return Owner
	case wrote:
		return recorded
	case !configured:
		return ""
	}
	c.reloadLocked()
	for _, a := range c.state.Approved {
		if a.Channel == channel && (a.ChatID == chat || a.SenderID == chat) {
			return Guest
		}
	}
	return ""
}

// Matches reports whether an allowFrom list admits sender on the
// channel: "*", the sender's id, or "<channel>:<id>". On Telegram, whose
// senders are "<id>|<username>" (split at the first "|" only: the rest
// is the username, whatever it holds), an entry of digits alone matches
// the id, an entry that starts with a letter or "@" the username (a
// sender "bob" is an id, not a username), and any other entry the whole
// sender. Channels use it to decide on what
// only they see, such as a Matrix room invitation.
func Matches(channel string, allow []string, sender string) bool {
	ok, _ := match(channel, allow, sender)
	return ok
}

// match is Matches, and whether it was "*" that admitted sender (star
// is false when an entry names sender as well).
func match(channel string, allow []string, sender string) (ok, star bool) {
	if sender == "" {
		return false, false
	}
	for _, e := range allow {
		e = strings.TrimSpace(e)
		if e == "*" {
			star = true
			continue
		}
		e = strings.TrimPrefix(e, channel+":")
		if e == "" {
			continue
		}
		if channel == "telegram" && telegramMatch(e, sender) || channel != "telegram" && e == sender {
			return true, false
		}
	}
	return star, star
}

// namesChat reports whether an allowFrom entry names chat itself (a
// direct chat's id is its user's; Telegram takes "@name" for a chat too).
func namesChat(channel string, allow []string, chat string) bool {
	for _, e := range allow {
		e = strings.TrimPrefix(strings.TrimSpace(e), channel+":")
		if e != "" && e != "*" && (e == chat || (channel == "telegram" && strings.TrimPrefix(e, "@") == strings.TrimPrefix(chat, "@"))) {
			return true
		}
	}
	return false
}

// telegramMatch applies a Telegram allowFrom entry to "<id>|<username>".
func telegramMatch(entry, sender string) bool {
	id, username, _ := strings.Cut(sender, "|")
	switch {
	case isDigits(entry):
		return entry == id
	case strings.HasPrefix(entry, "@"):
		return username != "" && strings.EqualFold(entry[1:], username)
	case isLetter(entry[0]):
		return username != "" && strings.EqualFold(entry, username)
	}
	return entry == sender // "<id>|<username>" whole, a group's "-100…"
}

func isDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func isLetter(b byte) bool { return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') }

// codeAlphabet leaves out letters and digits that look alike.
const codeAlphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"

func (c *Checker) newCodeLocked() string {
	for {
		var b [8]byte
		rand.Read(b[:]) //nolint:errcheck // never fails
		var s strings.Builder
		for i, x := range b {
			if i == 4 {
				s.WriteByte('-')
			}
			s.WriteByte(codeAlphabet[int(x)%len(codeAlphabet)])
		}
		code := s.String()
		if !slices.ContainsFunc(c.state.Pending, func(p Pending) bool { return p.Code == code }) {
			return code
		}
	}
}

// Approve pairs the sender of code; it fails on an unknown or expired
// code.
func (c *Checker) Approve(ctx context.Context, code string) (Approval, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	code = strings.ToUpper(strings.TrimSpace(code))
	var got Approval
	err := c.updateLocked(ctx, func(s *Book) error {
		now := c.now()
		for i, p := range s.Pending {
			if p.Code != code {
				continue
			}
			s.Pending = append(s.Pending[:i], s.Pending[i+1:]...)
			if !now.Before(p.Expires) {
				return fmt.Errorf("pairing code %s has expired (codes live %v): ask the sender to write again for a new one", code, CodeLifetime)
			}
			got = Approval{Channel: p.Channel, SenderID: p.SenderID, ChatID: p.ChatID, At: now}
			s.Approved = append(s.Approved, got)
			return nil
		}
		return fmt.Errorf("no pairing code %s is waiting (codes live %v)", code, CodeLifetime)
	})
	return got, err
}

// Approved lists the paired senders.
func (c *Checker) Approved() []Approval {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reloadLocked()
	return slices.Clone(c.state.Approved)
}

// reloadLocked takes the store's current book (the file is reread when
// another process changed it).
func (c *Checker) reloadLocked() {
	c.state = c.Pairings.Read()
}

// updateLocked changes the book atomically, pending codes expired for
// an hour dropped. The change is stored even when it fails (a code found
// expired is removed).
func (c *Checker) updateLocked(ctx context.Context, change func(*Book) error) error {
	now := c.now()
	store := c.Pairings
	var cerr error
	b, err := store.Update(ctx, func(b *Book) {
		b.Pending = slices.DeleteFunc(b.Pending, func(p Pending) bool { return now.Sub(p.Expires) > time.Hour })
		cerr = change(b)
	})
	if err != nil {
		return errors.Join(cerr, fmt.Errorf("pairing store %s: %w", store, err))
	}
	c.state = b
	return cerr
}

// Merge adds to b the approvals of other that b lacks (the same channel
// and sender) and its pending codes that b lacks, and says how many
// approvals it added: importing a gateway's file into a shared store.
func (b *Book) Merge(other Book) int {
	n := 0
	for _, a := range other.Approved {
		if !slices.ContainsFunc(b.Approved, func(x Approval) bool { return x.Channel == a.Channel && x.SenderID == a.SenderID }) {
			b.Approved = append(b.Approved, a)
			n++
		}
	}
	for _, p := range other.Pending {
		if !slices.ContainsFunc(b.Pending, func(x Pending) bool { return x.Code == p.Code }) {
			b.Pending = append(b.Pending, p)
		}
	}
	return n
}

// FilePairings is Pairings in a JSON file, changed under an exclusive
// lock shared with the other processes (nb gateway pair while the gateway
// runs) and written atomically. Without a Path the book is kept in
// memory.
type FilePairings struct {
	Path string
	// Warn receives a repaired file's warning.
	Warn func(string)

	mu      sync.Mutex
	book    Book
	modTime time.Time
	size    int64
}

// String implements Pairings: the file's path.
func (f *FilePairings) String() string { return f.Path }

// Read implements Pairings: the file is read again when it changed.
func (f *FilePairings) Read() Book {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Path == "" {
		return f.book
	}
	fi, err := os.Stat(f.Path)
	if err != nil {
		return f.book
	}
	if fi.ModTime().Equal(f.modTime) && fi.Size() == f.size {
		return f.book
	}
	f.book = f.readLocked()
	f.modTime, f.size = fi.ModTime(), fi.Size()
	return f.book
}

func (f *FilePairings) readLocked() Book {
	var b Book
	data, err := os.ReadFile(f.Path)
	if err != nil {
		return b
	}
	if err := json.Unmarshal(data, &b); err != nil {
		if f.Warn != nil {
			f.Warn(fmt.Sprintf("pairing store %s is not valid JSON (%v): starting from an empty one; approvals must be given again", f.Path, err))
		}
		return Book{}
	}
	return b
}

// Update implements Pairings; the file's lock is held briefly by whoever
// holds it, so ctx is not needed.
func (f *FilePairings) Update(_ context.Context, change func(*Book)) (Book, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.Path == "" {
		b := Book{Pending: slices.Clone(f.book.Pending), Approved: slices.Clone(f.book.Approved)}
		change(&b)
		f.book = b
		return b, nil
	}
	if err := os.MkdirAll(filepath.Dir(f.Path), 0o700); err != nil {
		return Book{}, err
	}
	lock, err := os.OpenFile(f.Path+".lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return Book{}, err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return Book{}, err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing unlocks too
	b := f.readLocked()
	change(&b)
	if err := writeJSON(f.Path, b); err != nil {
		return Book{}, err
	}
	f.book = b
	if fi, err := os.Stat(f.Path); err == nil {
		f.modTime, f.size = fi.ModTime(), fi.Size()
	}
	return b, nil
}

func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, append(data, '\n'), 0o600)
}
