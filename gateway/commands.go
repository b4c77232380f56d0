package gateway

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nbots/nb/gateway/access"
	"github.com/nbots/nb/gateway/bus"
)

// helpText is /help's answer.
const helpText = `🐈 nb commands:
/new — Start a new conversation (what it held goes to memory first)
/stop — Stop the current task
/status — Model, session size, context use and today's token use
/pair CODE — Let the sender of a pairing code talk to me
/restart — Restart the bot
/help — Show available commands`

// restartReply is /restart's answer, nanobot's.
const restartReply = "Restarting..."

// command runs an in-chat command; ok is false for an ordinary message.
func (g *Gateway) command(ctx context.Context, m bus.Inbound, role access.Role) (reply string, ok bool) {
	text := strings.TrimSpace(m.Content)
	if !strings.HasPrefix(text, "/") {
		return "", false
	}
	name, arg, _ := strings.Cut(text, " ")
	if at := strings.Index(name, "@"); at > 0 {
		name = name[:at] // /start@my_bot, as Telegram writes commands in groups
	}
	switch strings.ToLower(name) {
	case "/start":
		// nanobot's greeting, by the sender's first name when the
		// platform gives it.
		hi := "👋 Hi!"
		if first, _ := m.Metadata["first_name"].(string); first != "" {
			hi = "👋 Hi " + first + "!"
		}
		return hi + " I'm nb.\n\nSend me a message and I'll respond!\nType /help to see available commands.", true
	case "/restart":
		switch {
		case role != access.Owner:
			return "Only my owner can restart me.", true
		case g.Restart == nil:
			return "Restarting is not available here.", true
		}
		go func() {
			// The reply goes out first, as nanobot's does.
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
			g.log().Info("/restart: restarting", "channel", m.Channel, "sender", m.SenderID)
			g.Restart()
		}()
		return restartReply, true
	case "/help":
		return helpText, true
	case "/new":
		return g.newSession(ctx, m.SessionKey(), role == access.Owner), true
	case "/stop":
		return g.stop(ctx, m.SessionKey()), true
	case "/status":
		return g.status(ctx, m.SessionKey()), true
	case "/pair":
		if role != access.Owner {
			// A guest pairing strangers would let anyone in.
			return "Only my owner can approve pairing codes.", true
		}
		code := strings.TrimSpace(arg)
		if code == "" {
			return "Usage: /pair CODE", true
		}
		a, err := g.Access.Approve(ctx, code)
		if err != nil {
			return err.Error(), true
		}
		return fmt.Sprintf("Paired %s:%s: they can talk to me now.", a.Channel, a.SenderID), true
	}
	return "", false
}

// newSession archives the session into memory (when the memory package
// is plugged in, and the session is the owner's: a guest's conversation
// never reaches the memory), then clears it, under the session's lock.
func (g *Gateway) newSession(ctx context.Context, key string, owner bool) string {
	sess, err := g.Sessions.Get(ctx, key)
	if err != nil {
		g.log().Error("/new", "session", key, "error", err)
		return errorReply
	}
	unlock, err := sess.Lock(ctx)
	if err != nil {
		return errorReply
	}
	defer unlock()
	if g.Consolidator != nil && owner {
		if err := g.Consolidator.Archive(ctx, sess); err != nil {
			g.log().Error("/new: memory archival failed", "session", key, "error", err)
			return "Memory archival failed, session not cleared. Please try again."
		}
	}
	if err := sess.Clear(ctx); err != nil {
		g.log().Error("/new", "session", key, "error", err)
		return errorReply
	}
	return "New session started."
}

// maxContexts is how many sessions' last request size /status
// remembers at least (twice as many at most): a gateway that talked with
// ten thousand chats keeps the figure of the last few hundred (/status
// is asked in a chat that just talked), not a map entry for each of them
// (issue 36). A chat not among them shows its figure again after its
// next turn.
const maxContexts = 256

// noteContext records the size and budget of the last request of
// session key: in the current map until it holds maxContexts sessions,
// which then becomes the old one (the older one dropped).
func (g *Gateway) noteContext(key string, tokens, budget int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.contexts == nil || len(g.contexts) >= maxContexts {
		if _, ok := g.contexts[key]; !ok {
			g.contextsOld, g.contexts = g.contexts, make(map[string][2]int, min(len(g.contexts), maxContexts))
		}
	}
	g.contexts[key] = [2]int{tokens, budget}
}

// contextLocked is the last request's size and budget of session key,
// when remembered.
func (g *Gateway) contextLocked(key string) ([2]int, bool) {
	if c, ok := g.contexts[key]; ok {
		return c, true
	}
	c, ok := g.contextsOld[key]
	return c, ok
}

// status is /status's answer.
func (g *Gateway) status(ctx context.Context, key string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "🐈 nb gateway\nModel: %s\n", g.Runner.Model())
	if sess, err := g.Sessions.Get(ctx, key); err == nil {
		if err := sess.Reread(ctx); err != nil {
			g.log().Warn("/status: the session could not be read again", "session", key, "error", err)
		}
		m := sess.Meta()
		fmt.Fprintf(&b, "Session: %s, %d messages (%d unconsolidated), %s\n", key, sess.Len(), sess.Len()-m.LastConsolidated, size(sess.Size()))
	}
	g.mu.Lock()
	if c, ok := g.contextLocked(key); ok {
		fmt.Fprintf(&b, "Context: ~%d of %d estimated tokens (%d%%)\n", c[0], c[1], c[0]*100/c[1])
	}
	total := 0
	var sources []string
	for s, n := range g.tokens {
		total += n
		sources = append(sources, fmt.Sprintf("%s %d", s, n))
	}
	g.mu.Unlock()
	sort.Strings(sources)
	fmt.Fprintf(&b, "Tokens today: %d", total)
	if len(sources) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(sources, ", "))
	}
	if g.Budget != nil {
		if s := g.Budget.Status(key); s != "" {
			fmt.Fprintf(&b, "\nBudget: %s", s)
		}
	}
	return b.String()
}

func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
