package mochat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
)

// watchPayload is a session's (or a panel's) batch of events: the watch
// endpoint's answer, a subscribe acknowledgement's item, or a
// claw.session.events packet.
type watchPayload struct {
	SessionID string       `json:"sessionId"`
	Cursor    *int64       `json:"cursor"`
	Events    []watchEvent `json:"events"`
}

type watchEvent struct {
	Seq       int64      `json:"seq"`
	Type      string     `json:"type"`
	Timestamp string     `json:"timestamp"`
	Payload   msgPayload `json:"payload"`
}

// msgPayload is a message, in any of the forms Mochat sends it.
type msgPayload struct {
	MessageID  string          `json:"messageId"`
	ID         string          `json:"_id"`
	Author     string          `json:"author"`
	AuthorInfo authorInfo      `json:"authorInfo"`
	Content    json.RawMessage `json:"content"`
	Meta       map[string]any  `json:"meta"`
	GroupID    string          `json:"groupId"`
	ConverseID string          `json:"converseId"`
	PanelID    string          `json:"panelId"`
	CreatedAt  string          `json:"createdAt"`
}

type authorInfo struct {
	Nickname string `json:"nickname"`
	Email    string `json:"email"`
	AgentID  string `json:"agentId"`
}

// event is work for the receive loop, which alone publishes and moves
// the cursors.
type event struct {
	session *watchPayload
	// panel messages, oldest first; cold records them as seen only.
	panel    string
	messages []msgPayload
	cold     bool
	// flush delivers a panel's held messages.
	flush string
	done  chan struct{}
}

// entry is a message held for the reply delay.
type entry struct {
	body, author, name, username, id, group string
	at                                      time.Time
}

// seen is one target's window of message ids.
type seen struct {
	set   map[string]bool
	queue []string
}

func (s *seen) remember(id string) (dup bool) {
	if s.set[id] {
		return true
	}
	s.set[id] = true
	s.queue = append(s.queue, id)
	if len(s.queue) > SeenWindow {
		delete(s.set, s.queue[0])
		s.queue = s.queue[1:]
	}
	return false
}

// loop is the receive loop's state.
type loop struct {
	c      *Channel
	in     channel.Inbox
	cursor channel.Cursor
	seen   map[string]*seen
	held   map[string][]entry
	timers map[string]*time.Timer
}

// Run receives by Socket.IO, and by the claw API's polls while the socket
// is down, until ctx ends.
func (c *Channel) Run(parent context.Context, in channel.Inbox, ready func()) error {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)
	cursor, pos, err := c.env.Position(ctx, Name)
	if err != nil {
		return fmt.Errorf("mochat: receive position: %w", err)
	}
	if pos == "" && c.cfg.NanobotDir != "" {
		// A switching user's place: nanobot's own cursors.
		if b, err := os.ReadFile(filepath.Join(c.cfg.NanobotDir, "mochat", "session_cursors.json")); err == nil {
			pos = string(b)
		}
	}
	c.mu.Lock()
	c.cursors = parseCursors(pos)
	c.mu.Unlock()
	c.started = time.Now()
	l := &loop{c: c, in: in, cursor: cursor, seen: map[string]*seen{}, held: map[string][]entry{}, timers: map[string]*time.Timer{}}
	var once sync.Once
	c.ready = func() { c.link.Up(); once.Do(ready) }
	c.fail = func(err error) { cancel(err) }
	if err := c.discover(ctx); err != nil {
		var ae *authError
		if errors.As(err, &ae) {
			return ae
		}
		c.log.Warn("mochat: listing sessions and panels", "err", err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { c.socketLoop(ctx) })
	wg.Go(func() { c.pollers(ctx, &wg) })
	defer wg.Wait()
	defer cancel(nil)
	for {
		select {
		case <-ctx.Done():
			for _, t := range l.timers {
				t.Stop()
			}
			if parent.Err() != nil {
				return nil // stopped, not failed
			}
			return context.Cause(ctx)
		case ev := <-c.events:
			l.handle(ctx, ev)
			if ev.done != nil {
				close(ev.done)
			}
		}
	}
}

// submit hands ev to the receive loop and waits until it is handled; it
// reports false when ctx ended first.
func (c *Channel) submit(ctx context.Context, ev event) bool {
	ev.done = make(chan struct{})
	select {
	case c.events <- ev:
	case <-ctx.Done():
		return false
	}
	select {
	case <-ev.done:
		return true
	case <-ctx.Done():
		return false
	}
}

func (l *loop) handle(ctx context.Context, ev event) {
	switch {
	case ev.session != nil:
		l.session(ctx, *ev.session)
	case ev.flush != "":
		l.flushHeld(ctx, ev.flush, false, nil)
	case ev.panel != "":
		for _, m := range ev.messages {
			if t, err := time.Parse(time.RFC3339Nano, m.CreatedAt); (err != nil && ev.cold) || (err == nil && t.Before(l.c.started)) {
				// Written before the channel started: history, not
				// answered.
				if id := msgID(m); id != "" {
					l.window("panel:" + ev.panel).remember(id)
				}
				continue
			}
			l.message(ctx, ev.panel, "panel", m, m.CreatedAt)
		}
	}
}

func msgID(m msgPayload) string {
	if m.MessageID != "" {
		return m.MessageID
	}
	return m.ID
}

func (l *loop) window(key string) *seen {
	s := l.seen[key]
	if s == nil {
		s = &seen{set: map[string]bool{}}
		l.seen[key] = s
	}
	return s
}

// session handles a session's batch: its messages are published, then
// its cursor moves and is saved. A session met for the first time
// without a cursor starts at the server's cursor: its history is not
// answered.
func (l *loop) session(ctx context.Context, p watchPayload) {
	sid := p.SessionID
	if sid == "" {
		return
	}
	c := l.c
	c.mu.Lock()
	cur, known := c.cursors[sid]
	c.mu.Unlock()
	next := cur
	if !known {
		for _, e := range p.Events {
			next = max(next, e.Seq)
		}
		if p.Cursor != nil {
			next = max(next, *p.Cursor)
		}
		l.save(ctx, sid, next)
		return
	}
	for _, e := range p.Events {
		if e.Seq > 0 && e.Seq <= cur {
			continue // before the saved cursor: already published
		}
		if e.Type == "message.add" {
			if !l.message(ctx, sid, "session", e.Payload, e.Timestamp) {
				return // ctx ended: the cursor stays before this message
			}
		}
		next = max(next, e.Seq)
	}
	if p.Cursor != nil && *p.Cursor >= 0 {
		next = max(next, *p.Cursor)
	}
	if next != cur {
		l.save(ctx, sid, next)
	}
}

func (l *loop) save(ctx context.Context, sid string, cur int64) {
	c := l.c
	c.mu.Lock()
	if cur < c.cursors[sid] {
		c.mu.Unlock()
		return
	}
	c.cursors[sid] = cur
	data, _ := json.Marshal(cursors{SchemaVersion: 1, UpdatedAt: time.Now().UTC().Format(time.RFC3339), Cursors: c.cursors})
	c.mu.Unlock()
	if err := l.cursor.Save(ctx, string(data)); err != nil {
		c.log.Warn("mochat: saving the session cursors", "err", err, "where", l.cursor.String())
	}
}

// content is a message's text: a string as written, anything else as
// JSON (nanobot's normalize_mochat_content).
func content(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return strings.TrimSpace(s)
	}
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	return string(raw)
}

// mentioned is nanobot's resolve_was_mentioned.
func (c *Channel) mentioned(m msgPayload) bool {
	me := c.cfg.AgentUserID
	if m.Meta != nil {
		if m.Meta["mentioned"] == true || m.Meta["wasMentioned"] == true {
			return true
		}
		for _, f := range []string{"mentions", "mentionIds", "mentionedUserIds", "mentionedUsers"} {
			list, _ := m.Meta[f].([]any)
			for _, item := range list {
				id, _ := item.(string)
				if obj, ok := item.(map[string]any); ok {
					for _, k := range []string{"id", "userId", "_id"} {
						if v, _ := obj[k].(string); v != "" {
							id = v
							break
						}
					}
				}
				if me != "" && strings.TrimSpace(id) == me {
					return true
				}
			}
		}
	}
	if me == "" {
		return false
	}
	var text string
	json.Unmarshal(m.Content, &text) //nolint:errcheck // not a string: no mention in it
	return strings.Contains(text, "<@"+me+">") || strings.Contains(text, "@"+me)
}

// requireMention is nanobot's resolve_require_mention.
func (c *Channel) requireMention(session, group string) bool {
	for _, k := range []string{group, session, "*"} {
		if r, ok := c.cfg.Groups[k]; ok && k != "" {
			return r.RequireMention
		}
	}
	return c.cfg.Mention.RequireInGroups
}

// message applies the duplicate window, the mention rules and the reply
// delay to one message; false means ctx ended before it was published.
func (l *loop) message(ctx context.Context, target, kind string, m msgPayload, ts string) bool {
	c := l.c
	author := strings.TrimSpace(m.Author)
	if author == "" || (c.cfg.AgentUserID != "" && author == c.cfg.AgentUserID) {
		return true
	}
	key := kind + ":" + target
	id := msgID(m)
	if id != "" && l.window(key).remember(id) {
		return true
	}
	body := content(m.Content)
	if body == "" {
		body = "[empty message]"
	}
	name := m.AuthorInfo.Nickname
	if name == "" {
		name = m.AuthorInfo.Email
	}
	e := entry{body: body, author: author, name: name, username: m.AuthorInfo.AgentID, id: id, group: m.GroupID, at: time.Now()}
	if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
		e.at = t
	}
	group := m.GroupID != ""
	mentioned := c.mentioned(m)
	delay := kind == "panel" && c.cfg.ReplyDelayMode == "non-mention"
	if kind == "panel" && group && c.requireMention(target, m.GroupID) && !mentioned && !delay {
		return true
	}
	if delay {
		if mentioned {
			return l.flushHeld(ctx, key, true, &e)
		}
		l.held[key] = append(l.held[key], e)
		if t := l.timers[key]; t != nil {
			t.Stop()
		}
		l.timers[key] = time.AfterFunc(c.replyDelay, func() {
			select {
			case c.events <- event{flush: key}:
			case <-ctx.Done():
			}
		})
		return true
	}
	return l.dispatch(ctx, target, kind, []entry{e}, mentioned)
}

// flushHeld delivers a panel's held messages, with e when given.
func (l *loop) flushHeld(ctx context.Context, key string, mentioned bool, e *entry) bool {
	entries := l.held[key]
	delete(l.held, key)
	if t := l.timers[key]; t != nil {
		t.Stop()
		delete(l.timers, key)
	}
	if e != nil {
		entries = append(entries, *e)
	}
	if len(entries) == 0 {
		return true
	}
	kind, target, _ := strings.Cut(key, ":")
	return l.dispatch(ctx, target, kind, entries, mentioned)
}

// dispatch publishes entries as one message (nanobot's
// build_buffered_body), from the last one's author.
func (l *loop) dispatch(ctx context.Context, target, kind string, entries []entry, mentioned bool) bool {
	c := l.c
	last := entries[len(entries)-1]
	group := last.group != ""
	body := last.body
	if len(entries) > 1 {
		var lines []string
		for _, e := range entries {
			label := e.name
			if label == "" {
				label = e.username
			}
			if label == "" {
				label = e.author
			}
			if group {
				lines = append(lines, label+": "+e.body)
			} else {
				lines = append(lines, e.body)
			}
		}
		body = strings.TrimSpace(strings.Join(lines, "\n"))
	}
	m := bus.Inbound{
		Channel: Name, SenderID: last.author, ChatID: target, Content: body, Timestamp: last.at,
		Metadata: map[string]any{
			"message_id": last.id, "is_group": group, "group_id": last.group,
			"sender_name": last.name, "sender_username": last.username,
			"target_kind": kind, "was_mentioned": mentioned, "buffered_count": len(entries),
			channel.MetaGroup: group,
			// Mochat's own rules (mention, groups, reply delay) chose to
			// deliver it: the gateway's mention rule must not drop it.
			channel.MetaMentioned: true,
		},
	}
	if last.id != "" {
		m.ID = target + "/" + last.id
	}
	if group {
		c.mu.Lock()
		c.groupOf[target] = last.group
		c.mu.Unlock()
	}
	return channel.PublishDurably(ctx, l.in, m, c.log, 500*time.Millisecond)
}
