package mochat

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/gateway/channel"
)

// setSocket records whether the socket is subscribed: the polls pause
// while it is.
func (c *Channel) setSocket(up bool, s *sock) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.socketUp, c.sock = up, s
	close(c.up)
	c.up = make(chan struct{})
}

// pauseWhileSocket waits while the socket is up; false when ctx ended.
func (c *Channel) pauseWhileSocket(ctx context.Context) bool {
	for {
		c.mu.Lock()
		up, ch := c.socketUp, c.up
		c.mu.Unlock()
		if !up {
			return ctx.Err() == nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// discover adds the sessions and panels the server lists, for "*".
func (c *Channel) discover(ctx context.Context) error {
	var newSess, newPanels []string
	if c.allSess {
		var out struct {
			Sessions []struct {
				SessionID string `json:"sessionId"`
			} `json:"sessions"`
		}
		if err := c.api.post(ctx, "/api/claw/sessions/list", map[string]any{}, &out); err != nil {
			return err
		}
		c.mu.Lock()
		for _, s := range out.Sessions {
			if id := strings.TrimSpace(s.SessionID); id != "" && !c.sessions[id] {
				c.sessions[id] = true
				newSess = append(newSess, id)
			}
		}
		c.mu.Unlock()
	}
	if c.allPanel {
		var out struct {
			Panels []struct {
				ID   string `json:"id"`
				OID  string `json:"_id"`
				Type *int   `json:"type"`
			} `json:"panels"`
		}
		if err := c.api.post(ctx, "/api/claw/groups/get", map[string]any{}, &out); err != nil {
			return err
		}
		c.mu.Lock()
		for _, p := range out.Panels {
			id := p.ID
			if id == "" {
				id = p.OID
			}
			if (p.Type != nil && *p.Type != 0) || id == "" || c.panels[id] {
				continue // not a text panel, or known
			}
			c.panels[id] = true
			newPanels = append(newPanels, id)
		}
		c.mu.Unlock()
	}
	c.mu.Lock()
	s := c.sock
	c.mu.Unlock()
	if s != nil && (len(newSess) > 0 || len(newPanels) > 0) {
		c.subscribe(ctx, s, newSess, newPanels) //nolint:errcheck // logged; the next socket session subscribes all
	}
	return nil
}

// pollers runs one long poll per session and one poll per panel while
// the socket is down (nanobot's fallback workers), and the discovery
// every refreshIntervalMs.
func (c *Channel) pollers(ctx context.Context, wg *sync.WaitGroup) {
	running := map[string]bool{}
	refresh := ms(c.cfg.RefreshIntervalMs, 30000)
	last := time.Now()
	for {
		c.mu.Lock()
		sess, panels := sorted(c.sessions), sorted(c.panels)
		c.mu.Unlock()
		for _, s := range sess {
			if !running["s:"+s] {
				running["s:"+s] = true
				wg.Go(func() { c.watchSession(ctx, s) })
			}
		}
		for _, p := range panels {
			if !running["p:"+p] {
				running["p:"+p] = true
				wg.Go(func() { c.pollPanel(ctx, p) })
			}
		}
		if !channel.Sleep(ctx, min(refresh, time.Second)) {
			return
		}
		if time.Since(last) >= refresh {
			last = time.Now()
			if err := c.discover(ctx); err != nil && ctx.Err() == nil {
				c.failIfAuth(err)
				c.log.Warn("mochat: listing sessions and panels", "err", err)
			}
		}
	}
}

func (c *Channel) failIfAuth(err error) bool {
	var ae *authError
	if errors.As(err, &ae) {
		c.fail(ae)
		return true
	}
	return false
}

// wait is the pause after a failed poll: the server's Retry-After, else
// retryDelayMs doubling to 30 s.
func (c *Channel) wait(ctx context.Context, b *channel.Backoff, err error) bool {
	var ra *channel.RetryAfter
	after := time.Duration(0)
	if errors.As(err, &ra) {
		after = ra.After
	}
	return channel.Sleep(ctx, b.Failed(err, after))
}

// watchSession long-polls one session from its cursor.
func (c *Channel) watchSession(ctx context.Context, sid string) {
	b := channel.Backoff{Base: ms(c.cfg.RetryDelayMs, 500), Max: 30 * time.Second, Conn: &c.link}
	for c.pauseWhileSocket(ctx) {
		c.mu.Lock()
		cur := c.cursors[sid]
		c.mu.Unlock()
		var p watchPayload
		err := c.api.post(ctx, "/api/claw/sessions/watch", map[string]any{
			"sessionId": sid, "cursor": cur, "timeoutMs": ms(c.cfg.WatchTimeoutMs, 25000).Milliseconds(), "limit": c.limit(),
		}, &p)
		if err != nil {
			if ctx.Err() != nil || c.failIfAuth(err) {
				return
			}
			c.log.Warn("mochat: watching a session", "session", sid, "err", err)
			if !c.wait(ctx, &b, err) {
				return
			}
			continue
		}
		b.Reset()
		c.ready()
		if p.SessionID == "" {
			p.SessionID = sid
		}
		if !c.submit(ctx, event{session: &p}) {
			return
		}
	}
}

func (c *Channel) limit() int {
	if c.cfg.WatchLimit <= 0 {
		return 100
	}
	return c.cfg.WatchLimit
}

// pollPanel reads a panel's latest messages every refreshIntervalMs; the
// duplicate window keeps those already carried.
func (c *Channel) pollPanel(ctx context.Context, pid string) {
	b := channel.Backoff{Base: ms(c.cfg.RetryDelayMs, 500), Max: 30 * time.Second, Conn: &c.link}
	first := true
	for c.pauseWhileSocket(ctx) {
		var out struct {
			Messages []msgPayload `json:"messages"`
			GroupID  string       `json:"groupId"`
		}
		err := c.api.post(ctx, "/api/claw/groups/panels/messages", map[string]any{"panelId": pid, "limit": min(100, c.limit())}, &out)
		if err != nil {
			if ctx.Err() != nil || c.failIfAuth(err) {
				return
			}
			c.log.Warn("mochat: polling a panel", "panel", pid, "err", err)
			if !c.wait(ctx, &b, err) {
				return
			}
			continue
		}
		b.Reset()
		c.ready()
		msgs := slices.Clone(out.Messages)
		slices.Reverse(msgs) // newest first on the wire
		for i := range msgs {
			if msgs[i].GroupID == "" {
				msgs[i].GroupID = out.GroupID
			}
		}
		if !c.submit(ctx, event{panel: pid, messages: msgs, cold: first}) {
			return
		}
		first = false
		if !channel.Sleep(ctx, ms(c.cfg.RefreshIntervalMs, 30000)) {
			return
		}
	}
}
