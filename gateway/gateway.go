// Package gateway is nb's personal-assistant gateway: it takes what people
// write through the channels (bus.Inbound), checks who they are
// (package access), runs the agent's turn on their session (nanobot's
// JSONL files, package session) with a system prompt built from the
// workspace, and publishes the answer (bus.Outbound) for the dispatcher
// to deliver. Turns of one session run one at a time, sessions in
// parallel. Memory consolidation, cron, the heartbeat, budgets and skills
// plug in through the Memory, Skills, Budget and Consolidator seams and
// Direct.
package gateway

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/builtin/files"
	"github.com/nbots/nb/gateway/access"
	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/replica"
	"github.com/nbots/nb/gateway/session"
	"github.com/nbots/nb/internal/metric"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/tool"
	"github.com/nbots/nb/tracing"
)

// Sources of token use, for the ledger and the budgets.
const (
	SourceChat          = "chat"
	SourceCron          = "cron"
	SourceHeartbeat     = "heartbeat"
	SourceConsolidation = "consolidation"
	SourceSubagent      = "subagent"
)

// Budget is asked before each model call (a seam: gateway/budget
// implements it). Allow's error is shown to the user as it is: it says
// which budget is spent and when it resets.
type Budget interface {
	Allow(session, source string) error
	Spent(session, source string, u provider.Usage)
	// Status is /status's budget line.
	Status(session string) string
}

// Reserver is a Budget that holds a model call's tokens while it runs
// (gateway/budget's Ledger): a call reserves its prompt's estimated size
// and its answer's cap before it starts, and settles with its usage, so
// that calls starting together cannot all pass a check made before any
// of them is counted. ReserveCall waits while running calls hold what
// the call needs, and fails with a message for the user when the budget
// cannot take it.
type Reserver interface {
	ReserveCall(ctx context.Context, session, source string, prompt, answer int) (settle func(provider.Usage), err error)
}

// Consolidator archives a session's unconsolidated messages into memory
// before /new clears it (a seam: gateway/memory implements it).
type Consolidator interface {
	Archive(ctx context.Context, s *session.Session) error
}

// AfterTurn is told after each turn (memory consolidation in the
// background: a seam).
type AfterTurn func(s *session.Session)

// Gateway runs the assistant.
type Gateway struct {
	Bus      bus.Bus
	Sessions *session.Manager
	Access   *access.Checker
	Runner   Runner
	Prompt   *Prompt
	Log      *slog.Logger

	// Seams for the memory, budget and cron packages; nil is off.
	Budget Budget
	// AnswerTokens is the cap of the model's answer (maxTokens), which a
	// Reserver budget holds for each call besides its prompt.
	AnswerTokens int
	// HistoryMessages, when above 0, bounds the history a turn's prompt
	// holds to the last HistoryMessages messages not consolidated, from a
	// user's message (nanobot's memoryWindow up to v0.1.4.post4; see
	// session.Session.Conversation). 0 sends them all.
	HistoryMessages int
	Consolidator    Consolidator
	AfterTurn       AfterTurn
	// ExtraTools are offered in every turn (the cron tool).
	ExtraTools func(d Direct) []tool.Tool
	// Elector decides which replica runs a channel account's receive
	// loop (RunAccount); Alone sets replica.Local, which runs every one
	// here.
	Elector replica.Elector
	// Others reaches the turns other replicas run (/stop); Alone sets
	// replica.Local: there are none.
	Others replica.Stopper
	// Steer carries the messages that arrive during a turn to it: between
	// the replicas that share the bus, or, set by Alone, in this process
	// (LocalSteering). NoSteering steers nothing.
	Steer SharedSteering
	// Guests is what guests' turns may use (see roles.go).
	Guests GuestPolicy
	// Restart, when set, restarts the gateway (/restart, the owner's);
	// nil answers that restarting is not available.
	Restart func()
	// Words rewrites nb's messages shown in a chat (a provider's error)
	// in the words of the configuration the user wrote; nil keeps them.
	Words func(string) string
	// ProtectedPaths are more of the gateway's own files and folders
	// (absolute, or relative to the workspace) that no turn's tools may
	// read or write: the state folder, a session store elsewhere.
	ProtectedPaths []string

	mu      sync.Mutex
	running map[string]map[*runningTurn]bool
	// contexts are the last request's size and budget by session
	// (/status), of the sessions of the last maxContexts turns at least
	// (see noteContext).
	contexts, contextsOld map[string][2]int

	channels map[string]*channelRecord
	expected []string
	tokens   map[string]int // today's tokens by source
	day      string
	// flooding are the sessions told that their messages are dropped,
	// until one is queued again (see flooded).
	flooding map[string]bool
	// paths are the files.Policy's paths of every turn (policyPaths).
	paths policyPaths
}

type runningTurn struct {
	cancel context.CancelFunc
	// queue are the session's messages that arrived while the turn ran,
	// for its next steering point.
	queue []bus.Inbound
	// took are the keys (steerKey) of the messages the turn took.
	took []string
	// from is the key of the message the turn answers ("" for cron and
	// the heartbeat) and at when it was written: the turn takes neither
	// that message (its offer may arrive after the turn started) nor one
	// written before it (answered by a turn of its own already).
	from string
	at   time.Time
}

// SharedSteering carries steering between replicas that share the bus:
// a message that arrives during a turn reaches the replica running that
// turn, and the messages a completed turn took are known to every
// replica, so that the bus's copy of one is not answered again wherever
// the bus delivers it.
type SharedSteering interface {
	// Offer sends m to every replica, this one included.
	Offer(ctx context.Context, m bus.Inbound) error
	// Offers gives fn the offers of every replica until ctx ends.
	Offers(ctx context.Context, fn func(bus.Inbound)) error
	// Took records that a completed turn took the messages of keys.
	Took(ctx context.Context, keys []string) error
	// Taken reports whether a completed turn took the message of key.
	Taken(ctx context.Context, key string) (bool, error)
}

func (g *Gateway) log() *slog.Logger {
	if g.Log != nil {
		return g.Log
	}
	return slog.Default()
}

// Inbox is what the channel named name publishes to: /stop is handled at
// once (it must reach the turn it stops, which holds the session's queue);
// everything else goes on the bus.
func (g *Gateway) Inbox(name string) channel.Inbox { return inbox{g} }

type inbox struct{ g *Gateway }

func (i inbox) Publish(ctx context.Context, m bus.Inbound) error {
	metric.Received(m.Channel)
	if strings.TrimSpace(m.Content) == "/stop" {
		if i.g.authorize(ctx, m).Verdict == access.Allow {
			i.g.reply(ctx, m, "", i.g.stop(ctx, m.SessionKey()))
		}
		return nil
	}
	dup, err := i.g.Bus.PublishInbound(ctx, m)
	if full := (*bus.QueueFull)(nil); errors.As(err, &full) {
		i.g.flooded(ctx, m, full)
		return nil // dropped: the platform must not send it again
	}
	if err == nil {
		i.g.calmed(m.SessionKey())
	}
	if err == nil && !dup && steerable(m) {
		if oerr := i.g.Steer.Offer(ctx, m); oerr != nil {
			i.g.log().Warn("steering offer not sent: the message will be the next turn", "channel", m.Channel, "error", oerr)
		}
	}
	return err
}

// floodNotice is what a chat that writes faster than its turns run is
// told, once per burst.
const floodNotice = "You are writing faster than I can answer: %d messages are already waiting, so I am dropping the new ones until I catch up. Please wait for my answers, then write again."

// flooded drops m, refused by the bus because its session's queue is
// full, and tells the chat once per burst (the first refusal since a
// message of the session was last queued). Senders not let in are not
// told: the gateway answers strangers nothing but a pairing code.
func (g *Gateway) flooded(ctx context.Context, m bus.Inbound, full *bus.QueueFull) {
	key := m.SessionKey()
	if !g.Access.Admitted(g.accessRequest(m)) {
		g.log().Debug("message of a sender not allowed dropped: its chat's queue is full", "channel", m.Channel, "session", key)
		return
	}
	g.mu.Lock()
	first := !g.flooding[key]
	if first {
		if g.flooding == nil {
			g.flooding = map[string]bool{}
		}
		g.flooding[key] = true
	}
	g.mu.Unlock()
	if !first {
		return
	}
	g.log().Warn("messages dropped: their chat's queue is full (gateway.limits.queuedPerChat)", "channel", m.Channel, "session", key, "limit", full.Limit)
	g.reply(ctx, m, "", fmt.Sprintf(floodNotice, full.Limit))
}

// calmed ends the session's flood: a message was queued again.
func (g *Gateway) calmed(key string) {
	g.mu.Lock()
	if g.flooding[key] {
		delete(g.flooding, key)
	}
	g.mu.Unlock()
}

// Admits implements channel.Admitter: whether m's sender is let in now,
// asked without issuing a pairing code, so that a channel downloads no
// stranger's media.
func (i inbox) Admits(m bus.Inbound) bool { return i.g.Access.Admitted(i.g.accessRequest(m)) }

// steerable tells the messages that may steer a running turn: not
// commands, messages without an id (they could not be recognised when
// the bus delivers them) nor messages with media.
func steerable(m bus.Inbound) bool {
	return m.ID != "" && m.Channel != SystemChan && !strings.HasPrefix(strings.TrimSpace(m.Content), "/") && len(m.Media) == 0
}

// steerKey names a message among the steered ones.
func steerKey(m bus.Inbound) string { return m.Channel + "\x00" + m.ID }

// offer gives a message that arrived while its session's turn runs in
// this process to that turn, which takes it after its current round of
// tool calls. The message is on the bus all the same: when the turn ends
// before it took it, the bus delivers it as the next turn; when the turn
// took it and completed, handle skips it. The bus delivers a session's
// messages in order, one at a time, each after the turn of the one
// before ended, so a completed turn recorded what it took before its
// message's successor is delivered: never lost, never answered twice.
// With replicas, Steer carries the offer to the replica running the turn
// and the record to every replica; replicas without shared steering
// (NoSteering) steer nothing: the bus's copy could reach a replica that
// does not know the turn took it. Senders not allowed are left to the
// bus alone.
func (g *Gateway) offer(ctx context.Context, m bus.Inbound) {
	if !steerable(m) {
		return
	}
	g.mu.Lock()
	turns := g.running[m.SessionKey()]
	g.mu.Unlock()
	if len(turns) == 0 || g.authorize(ctx, m).Verdict != access.Allow {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for rt := range g.running[m.SessionKey()] {
		if rt.from == steerKey(m) || m.Timestamp.Before(rt.at) {
			continue
		}
		rt.queue = append(rt.queue, m)
		g.log().Debug("message offered to the running turn", "channel", m.Channel, "id", m.ID)
		return
	}
}

// steering is a running turn's Steering: the messages offered to it
// since its last round, kept in rt.took for tookAll.
func (g *Gateway) steering(rt *runningTurn) func() []string {
	return func() []string {
		g.mu.Lock()
		defer g.mu.Unlock()
		var out []string
		for _, m := range rt.queue {
			rt.took = append(rt.took, steerKey(m))
			out = append(out, m.Content)
		}
		rt.queue = nil
		return out
	}
}

// tookAll records, once a turn completed (its answer is on the bus),
// the messages it took, so that the bus's copies are not answered again.
// A turn that failed or was stopped records nothing: what it took is
// answered as the next turns.
func (g *Gateway) tookAll(ctx context.Context, rt *runningTurn) {
	g.mu.Lock()
	keys := rt.took
	rt.took = nil
	g.mu.Unlock()
	if len(keys) > 0 {
		if err := g.Steer.Took(ctx, keys); err != nil {
			// Then the copies are answered as turns of their own: better
			// twice than never.
			g.log().Error("steered messages not recorded", "count", len(keys), "error", err)
		}
	}
}

// wasSteered reports whether a completed turn took m.
func (g *Gateway) wasSteered(ctx context.Context, m bus.Inbound) bool {
	if !steerable(m) {
		return false
	}
	taken, err := g.Steer.Taken(ctx, steerKey(m))
	if err != nil {
		g.log().Warn("steered messages not readable: the message is answered", "channel", m.Channel, "id", m.ID, "error", err)
	}
	return taken
}

// Run takes inbound messages and the steering offers of every replica
// until ctx ends. It returns once the goroutine receiving the offers has
// ended too.
func (g *Gateway) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	offers := make(chan struct{})
	go func() {
		defer close(offers)
		if err := g.Steer.Offers(ctx, func(m bus.Inbound) { g.offer(ctx, m) }); err != nil && ctx.Err() == nil {
			g.log().Warn("steering offers not received: messages during a turn are the next turns", "error", err)
		}
	}()
	err := g.Bus.Inbound(ctx, g.handle)
	cancel()
	<-offers
	return err
}

// Local channels: their messages come from nb's own front-ends.
const (
	WebChannel = "web"
	CLIChannel = "cli"
	SystemChan = "system"
	// MetaWebAuthenticated (bool) is set by the web chat on the messages
	// of requests its listener authenticated (loopback or token).
	MetaWebAuthenticated = "_nb_web_authenticated"
)

// authorize is the gateway's one call of access.Authorize for a message.
func (g *Gateway) authorize(ctx context.Context, m bus.Inbound) access.Decision {
	return g.Access.Authorize(ctx, g.accessRequest(m))
}

// accessRequest is what access decides for a message.
func (g *Gateway) accessRequest(m bus.Inbound) access.Request {
	r := access.Request{Entry: access.Channel, Channel: m.Channel, SenderID: m.SenderID, ChatID: m.ChatID}
	r.Group, _ = m.Metadata[channel.MetaGroup].(bool)
	r.Mentioned, _ = m.Metadata[channel.MetaMentioned].(bool)
	switch m.Channel {
	case WebChannel:
		r.Entry = access.Web
		r.Authenticated, _ = m.Metadata[MetaWebAuthenticated].(bool)
	case CLIChannel:
		r.Entry = access.Terminal
	case SystemChan:
		// A sub-agent's result, for its origin chat "channel:chat".
		r.Entry = access.Subagent
		r.Channel, r.ChatID, _ = strings.Cut(m.ChatID, ":")
	}
	return r
}

// handle runs one inbound message.
func (g *Gateway) handle(ctx context.Context, m bus.Inbound) error {
	if g.wasSteered(ctx, m) {
		g.log().Debug("message given to the turn that was running", "channel", m.Channel, "id", m.ID)
		return nil
	}
	d := g.authorize(ctx, m)
	switch d.Verdict {
	case access.Pair:
		if d.NewCode {
			g.reply(ctx, m, "", fmt.Sprintf("I don't know you yet. Your pairing code is %s: ask my owner to run `nb gateway pair %s` (or to send /pair %s from an allowed chat). It is valid for %d minutes.",
				d.Code, d.Code, d.Code, int(access.CodeLifetime/time.Minute)))
		}
		g.log().Warn("message from an unknown sender", "channel", m.Channel, "sender", m.SenderID, "pairing", d.NewCode)
		return nil
	case access.Allow:
	default:
		g.log().Info("message not answered", "channel", m.Channel, "sender", m.SenderID, "reason", d.Reason)
		return nil
	}
	if reply, ok := g.command(ctx, m, d.Role); ok {
		g.reply(ctx, m, "", reply)
		return nil
	}
	key, channelName, chat := m.SessionKey(), m.Channel, m.ChatID
	if m.Channel == SystemChan {
		channelName, chat, _ = strings.Cut(m.ChatID, ":")
		key = channelName + ":" + chat
	}
	_, err := g.turn(ctx, Direct{SessionKey: key, Channel: channelName, ChatID: chat, Content: m.Content, Source: SourceChat, Deliver: true, ReplyTo: m.ID, Media: m.Media, Turn: turnOf(m), From: m, Role: d.Role})
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return err // shutting down: the bus keeps the message
	}
	var again storeError
	if errors.As(err, &again) {
		return err // the bus delivers it again (maybe to a replica that reaches the store)
	}
	return nil
}

// Direct is a turn that does not come from a channel message: a cron
// job, the heartbeat (nanobot's process_direct), or a channel message.
type Direct struct {
	// Entry is the entry point for the delivery's authorisation (Cron,
	// Heartbeat); "" is a channel message, already authorised.
	Entry access.Entry
	// SessionKey is the session the turn runs on ("cron:<id>",
	// "heartbeat").
	SessionKey string
	// Channel and ChatID are where the answer goes when Deliver is set.
	Channel, ChatID string
	Content         string
	// Source is the ledger's source (SourceCron...).
	Source  string
	Deliver bool
	ReplyTo string
	// Media are the paths of what came with the message (bus.Inbound.Media).
	Media []string
	// Turn identifies the turn ("": a new id). A message's turn is named
	// after the message, so that the turn run again after its replica
	// died publishes a reply the bus knows it has (bus.FinalKey).
	Turn string
	// From is the channel message the turn answers (none for cron and
	// the heartbeat): the turn is not steered by it, nor by older ones.
	From bus.Inbound
	// Role is whose turn it is: the owner's tools and files, or a
	// guest's ("" is a guest's; RunDirect's turns are the owner's).
	Role access.Role
	// Notify, when set, decides whether the answer of a delivered turn
	// is sent (nanobot's evaluate_response gate for cron and the
	// heartbeat); nil sends it.
	Notify func(ctx context.Context, answer string) bool
}

// storeError is a turn that could not use the session's store (it could
// not be reached, or the turn lost its hold on the session): the message
// is handed back to the bus, to be run again, rather than answered with
// an error.
type storeError struct{ err error }

func (e storeError) Error() string { return e.err.Error() }
func (e storeError) Unwrap() error { return e.err }

// turnOf is the turn id of a channel message: derived from its platform
// id, random when it has none.
func turnOf(m bus.Inbound) string {
	if m.ID == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(m.Channel + "\x00" + m.ID))
	return "m" + hex.EncodeToString(sum[:8])
}

// RunDirect runs a turn for cron or the heartbeat and returns its answer;
// it is delivered when d.Deliver and the destination is allowed (for
// cron and the heartbeat: an owner's chat). The turn is the owner's
// unless d.Role says otherwise: only the owner's turns create cron jobs
// and write HEARTBEAT.md.
func (g *Gateway) RunDirect(ctx context.Context, d Direct) (string, error) {
	if d.Role == "" {
		d.Role = access.Owner
	}
	if d.Deliver {
		if dec := g.Access.Authorize(ctx, access.Request{Entry: d.Entry, Channel: d.Channel, ChatID: d.ChatID}); dec.Verdict != access.Allow {
			g.log().Warn("delivery refused", "entry", d.Entry, "channel", d.Channel, "chat", d.ChatID, "reason", dec.Reason)
			d.Deliver = false
		}
	}
	return g.turn(ctx, d)
}

// Nanobot's answers, verbatim.
const (
	errorReply = "Sorry, I encountered an error."
	emptyReply = "I've completed processing but have no response to give."
)

// words is g.Words, or nothing changed.
func (g *Gateway) words(s string) string {
	if g.Words != nil {
		return g.Words(s)
	}
	return s
}

// failure is what a chat is told of a turn that failed: the provider's
// own error for the owner, as nanobot shows it ("Error calling LLM: …"),
// in the configuration's words; nanobot's apology for anything else, and
// for guests (the provider's answer may name the owner's settings).
func (g *Gateway) failure(d Direct, err error) string {
	words := g.words
	var pe *provider.Error
	switch {
	case d.Role != access.Owner:
		return errorReply
	case errors.As(err, &pe):
		return "Error calling LLM: " + words(pe.Error())
	case d.Channel == CLIChannel:
		// nb gateway chat: the owner at the terminal reads why.
		return strings.TrimSuffix(errorReply, ".") + ": " + words(err.Error())
	}
	return errorReply
}

var thinkBlock = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?s)<think>.*?</think>`) })

// turn runs the agent on d's session, one turn at a time per session
// (across processes too), and publishes the answer.
func (g *Gateway) turn(ctx context.Context, d Direct) (_ string, err error) {
	end := metric.Turn(d.Channel, d.Source)
	defer func() { end(err) }()
	ctx, span := tracing.StartTurn(ctx, d.Channel)
	defer func() { tracing.End(span, err) }()
	sess, err := g.Sessions.Get(ctx, d.SessionKey)
	if err != nil {
		g.log().Error("session", "key", d.SessionKey, "error", err)
		if g.Sessions.Stored() {
			// A store that cannot be reached now may be reached by the
			// replica the message goes to next: no error reply then.
			return "", storeError{err}
		}
		g.publish(ctx, d, bus.Error, "", errorReply)
		return "", err
	}
	unlock, err := sess.Lock(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return "", err // stopping: no answer is owed
		}
		g.log().Error("session", "key", d.SessionKey, "error", err)
		if g.Sessions.Stored() {
			return "", storeError{err}
		}
		// The session's lock file could not be taken (its folder gone,
		// the disk full): the user hears so rather than waiting for an
		// answer that never comes.
		g.publish(ctx, d, bus.Error, "", errorReply)
		return "", err
	}
	defer unlock()
	mark := sess.Mark()
	turnCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	rt := &runningTurn{cancel: cancel}
	if d.From.ID != "" {
		rt.from, rt.at = steerKey(d.From), d.From.Timestamp
	}
	g.track(d.SessionKey, rt)
	defer g.untrack(d.SessionKey, rt)

	turnID := d.Turn
	if turnID == "" {
		turnID = newID()
	}
	if g.Budget != nil {
		if err := g.Budget.Allow(d.SessionKey, d.Source); err != nil {
			g.publish(ctx, d, bus.Error, turnID, err.Error())
			return "", err
		}
	}
	var (
		mu        sync.Mutex
		streamed  strings.Builder
		budgetErr error
		sentSame  bool
		settle    func(provider.Usage) // the running call's reservation
	)
	reserver, _ := g.Budget.(Reserver)
	release := func(u provider.Usage) bool {
		mu.Lock()
		s := settle
		settle = nil
		mu.Unlock()
		if s != nil {
			s(u)
		}
		return s != nil
	}
	defer release(provider.Usage{}) // a call that failed: what it cost is unknown
	msgTool := &messageTool{g: g, from: d, onSent: func(ch, chat string) {
		if ch == d.Channel && chat == d.ChatID {
			mu.Lock()
			sentSame = true
			mu.Unlock()
		}
	}}
	tools := []tool.Tool{msgTool}
	if g.ExtraTools != nil {
		tools = append(tools, g.ExtraTools(d)...)
	}
	filter := g.toolFilter(d)
	tools = filterTools(tools, filter)
	turnCtx = files.WithPolicy(turnCtx, g.policy(ctx, d, turnID))
	// Streamed progress starts after half a second: a quick answer is
	// sent once, whole.
	lastProgress := time.Now()
	// A running command's last lines show in the progress message, for
	// the channels that edit it in place.
	live := &liveOutput{}
	onEvent := func(ev agent.Event) {
		if text := live.event(ev); text != "" && d.Deliver {
			g.publishMeta(ctx, d, bus.Progress, turnID, text, map[string]any{channel.MetaStreamed: true, channel.MetaLiveAt: time.Now().UnixMilli()})
		}
		switch ev.Kind {
		case agent.RoundStart:
			if ev.ContextBudget > 0 {
				g.noteContext(d.SessionKey, ev.ContextTokens, ev.ContextBudget)
			}
			if reserver != nil {
				release(provider.Usage{}) // a round that ended without its RoundEnd
				s, err := reserver.ReserveCall(turnCtx, d.SessionKey, d.Source, ev.ContextTokens, g.AnswerTokens)
				mu.Lock()
				settle = s
				if err != nil && turnCtx.Err() == nil {
					budgetErr = err
				}
				mu.Unlock()
				if err != nil {
					cancel()
				}
			} else if ev.Round > 1 && g.Budget != nil {
				if err := g.Budget.Allow(d.SessionKey, d.Source); err != nil {
					mu.Lock()
					budgetErr = err
					mu.Unlock()
					cancel()
				}
			}
		case agent.TextDelta:
			mu.Lock()
			streamed.WriteString(ev.Text)
			text := streamed.String()
			due := time.Since(lastProgress) > 500*time.Millisecond
			if due {
				lastProgress = time.Now()
			}
			mu.Unlock()
			if due && d.Deliver {
				g.publishMeta(ctx, d, bus.Progress, turnID, text, map[string]any{channel.MetaStreamed: true})
			}
		case agent.RoundEnd:
			g.spent(d.SessionKey, d.Source, ev.Usage, release(ev.Usage))
			mu.Lock()
			streamed.Reset()
			mu.Unlock()
			if len(ev.Calls) > 0 && d.Deliver {
				if t := strings.TrimSpace(thinkBlock().ReplaceAllString(ev.Text, "")); t != "" {
					g.publish(ctx, d, bus.Progress, turnID, t)
				}
				g.publish(ctx, d, bus.ToolHint, turnID, toolHint(ev.Calls))
			}
		}
	}
	input, images := g.turnMedia(d.Content, d.Media)
	ans, err := g.Runner.Run(turnCtx, Turn{Conversation: sess.Conversation(turnCtx, g.HistoryMessages), Input: input, Images: images, System: g.Prompt.build(d.Channel, d.ChatID, d.Role == access.Owner), Tools: tools, OnEvent: onEvent,
		Steering: g.steering(rt), ToolFilter: filter})
	// The turn's messages are durable before anyone hears of them.
	if serr := sess.Sync(); serr != nil {
		g.log().Error("session sync", "key", d.SessionKey, "error", serr)
		err = errors.Join(err, serr)
	}
	mu.Lock()
	bErr, same := budgetErr, sentSame
	mu.Unlock()
	switch {
	case bErr != nil:
		g.publish(ctx, d, bus.Error, turnID, bErr.Error())
		return "", bErr
	case err != nil && turnCtx.Err() != nil && ctx.Err() == nil:
		// /stop: its own reply says so; nothing of the turn is kept, as
		// nanobot keeps nothing of a cancelled turn.
		if rerr := sess.Rollback(mark); rerr != nil {
			g.log().Error("session", "key", d.SessionKey, "error", rerr)
		}
		return "", context.Canceled
	case err != nil && ctx.Err() != nil:
		return "", ctx.Err()
	case errors.Is(err, state.ErrLost):
		// Another replica took the session over (this one lost its
		// store): no reply from here, so that the turn run again there
		// answers (an error reply would take its turn's place).
		g.log().Error("turn stopped: the session's hold was lost", "session", d.SessionKey, "error", err)
		return "", storeError{err}
	case err != nil:
		g.log().Error("turn failed", "session", d.SessionKey, "error", g.words(err.Error()))
		g.publish(ctx, d, bus.Error, turnID, g.failure(d, err))
		return "", err
	}
	text := strings.TrimSpace(thinkBlock().ReplaceAllString(ans.Text, ""))
	if text == "" {
		text = emptyReply
	}
	switch {
	case d.Role != access.Owner:
		// A guest's conversation never reaches the memory every prompt
		// shares: its old messages leave the context instead.
		g.forgetOld(ctx, sess)
	case g.AfterTurn != nil:
		g.AfterTurn(sess)
	}
	if !same && (!d.Deliver || d.Notify == nil || d.Notify(ctx, text)) {
		g.publish(ctx, d, bus.Message, turnID, text)
	}
	g.tookAll(ctx, rt)
	return text, nil
}

// toolHint shows calls as nanobot does: name("first argument").
func toolHint(calls []tool.Call) string {
	var parts []string
	for _, c := range calls {
		arg := ""
		for _, k := range []string{"path", "command", "query", "url", "content", "task", "message"} {
			if v, ok := c.Arguments[k].(string); ok {
				arg = v
				break
			}
		}
		if len(arg) > 40 {
			arg = arg[:40] + "…"
		}
		if arg != "" {
			parts = append(parts, fmt.Sprintf("%s(%q)", c.Name, arg))
		} else {
			parts = append(parts, c.Name)
		}
	}
	return strings.Join(parts, ", ")
}

func (g *Gateway) publish(ctx context.Context, d Direct, kind bus.Kind, turn, text string) {
	g.publishMeta(ctx, d, kind, turn, text, nil)
}

func (g *Gateway) publishMeta(ctx context.Context, d Direct, kind bus.Kind, turn, text string, meta map[string]any) {
	if !d.Deliver {
		return
	}
	if err := g.Bus.PublishOutbound(ctx, bus.Outbound{Kind: kind, Channel: d.Channel, ChatID: d.ChatID, Content: text, ReplyTo: d.ReplyTo, Turn: turn, Metadata: meta}); err != nil {
		g.log().Error("reply not queued", "channel", d.Channel, "chat", d.ChatID, "error", err)
	}
}

// reply answers a message outside a turn (commands, pairing).
func (g *Gateway) reply(ctx context.Context, m bus.Inbound, turn, text string) {
	g.publish(ctx, Direct{Channel: m.Channel, ChatID: m.ChatID, ReplyTo: m.ID, Deliver: true}, bus.Message, turn, text)
}

func (g *Gateway) track(key string, rt *runningTurn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running == nil {
		g.running = map[string]map[*runningTurn]bool{}
	}
	if g.running[key] == nil {
		g.running[key] = map[*runningTurn]bool{}
	}
	g.running[key][rt] = true
}

func (g *Gateway) untrack(key string, rt *runningTurn) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.running[key], rt)
	if len(g.running[key]) == 0 {
		delete(g.running, key)
	}
}

// stop cancels the session's running turns (and with them their tool
// processes and sub-agents), here and on the other replicas.
func (g *Gateway) stop(ctx context.Context, key string) string {
	n := g.StopHere(key)
	more, err := g.Others.Stop(ctx, key)
	if err != nil {
		g.log().Warn("/stop: the other replicas", "session", key, "error", err)
	}
	n += more
	if n == 0 {
		return "No active task to stop."
	}
	return fmt.Sprintf("⏹ Stopped %d task(s).", n)
}

// StopHere cancels the session's turns running in this process and says
// how many there were.
func (g *Gateway) StopHere(key string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for rt := range g.running[key] {
		rt.cancel()
		n++
	}
	return n
}

// spent records a call's tokens in today's ledger and, unless its
// reservation was settled with them, in the budget.
func (g *Gateway) spent(key, source string, u provider.Usage, settled bool) {
	if g.Budget != nil && !settled {
		g.Budget.Spent(key, source, u)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	today := time.Now().Format(time.DateOnly)
	if g.day != today || g.tokens == nil {
		g.day, g.tokens = today, map[string]int{}
	}
	g.tokens[source] += u.InputTokens + u.OutputTokens
}

func newID() string {
	var b [8]byte
	rand.Read(b[:]) //nolint:errcheck // never fails
	return hex.EncodeToString(b[:])
}

// Channel readiness, for /ready and nb gateway channels status.

// Expect names the enabled channels /ready waits for.
func (g *Gateway) Expect(names ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, name := range names {
		if !slices.Contains(g.expected, name) {
			g.expected = append(g.expected, name)
		}
	}
}

// Disabled names configured channels that are switched off
// (enabled: false): they are listed, and /ready does not wait for them.
func (g *Gateway) Disabled(names ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, name := range names {
		g.channel(name).disabled = true
	}
}

// channelRecord is what the gateway knows of one channel's connection.
type channelRecord struct {
	// link is the running receive loop's own report (nil when the
	// channel reports nothing, or its loop does not run here).
	link channel.Reporter
	// connected: the loop called ready (for channels without a link).
	connected bool
	// standby: another replica runs the receive loop.
	standby bool
	// stopped is why the loop ended for good ("" while it runs).
	stopped  string
	since    time.Time
	disabled bool
}

// channel is name's record, created if needed; g.mu is held.
func (g *Gateway) channel(name string) *channelRecord {
	if g.channels == nil {
		g.channels = map[string]*channelRecord{}
	}
	r := g.channels[name]
	if r == nil {
		r = &channelRecord{}
		g.channels[name] = r
	}
	return r
}

// Standby records that another replica runs the channel's receive loop:
// this replica is ready without it (and still delivers its replies).
func (g *Gateway) Standby(name string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.channel(name)
	r.standby, r.link, r.stopped, r.since = true, nil, "", time.Now()
}

// Connected records that a channel connected once (err nil) or why it
// cannot run at all (err not nil: a channel this nb has not, a refused
// token): such a channel keeps /ready failing.
func (g *Gateway) Connected(name string, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.channel(name)
	if err != nil {
		r.stopped, r.link, r.standby, r.since = err.Error(), nil, false, time.Now()
		return
	}
	if r.stopped == "" {
		if !r.connected || r.standby {
			r.since = time.Now()
		}
		r.connected, r.standby = true, false
	}
}

// ReadyGrace is how long a channel that was connected may try to connect
// again and still count as ready: one failed poll, a dropped websocket
// that the next try restores, does not take the gateway out of its load
// balancer; a channel failing for longer does.
const ReadyGrace = 30 * time.Second

// ChannelState is one channel's line in /ready and nb gateway channels
// status.
type ChannelState struct {
	Name string `json:"name"`
	// State is "connected", "connecting", "stopped" (it cannot run),
	// "standby" (another replica receives) or "disabled".
	State string `json:"state"`
	// Reason says why it is not connected.
	Reason string    `json:"reason,omitempty"`
	Since  time.Time `json:"since,omitzero"`
	// Reconnecting is true for a channel connecting again after it lost
	// its connection less than ReadyGrace ago: still ready.
	Reconnecting bool `json:"reconnecting,omitempty"`
}

// Ready is true for a channel that receives, here or on another replica,
// that lost its connection less than ReadyGrace ago, or that is switched
// off.
func (s ChannelState) Ready() bool {
	return s.State == "connected" || s.State == "standby" || s.State == "disabled" || s.Reconnecting
}

// Receiving is Ready without ReadyGrace: false from the moment a channel
// lost its connection (nb_gateway_channel_connected reads it, so a
// dashboard sees the loss that readiness forgives for a while).
func (s ChannelState) Receiving() bool { return s.Ready() && !s.Reconnecting }

// String is the state with its reason ("connecting: 401 Unauthorized").
func (s ChannelState) String() string {
	if s.Reason == "" {
		return s.State
	}
	return s.State + ": " + s.Reason
}

// Channels are the states of the expected and disabled channels, by
// name.
func (g *Gateway) Channels() []ChannelState {
	g.mu.Lock()
	names := slices.Clone(g.expected)
	for name, r := range g.channels {
		if r.disabled && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	recs := make([]channelRecord, len(names))
	for i, name := range names {
		if r := g.channels[name]; r != nil {
			recs[i] = *r
		}
	}
	g.mu.Unlock()
	out := make([]ChannelState, len(names))
	for i, r := range recs {
		st := ChannelState{Name: names[i], State: "connecting", Since: r.since}
		switch {
		case r.stopped != "":
			st.State, st.Reason = "stopped", r.stopped
		case r.standby:
			st.State, st.Reason = "standby", "another replica receives"
		case r.link != nil:
			ls := r.link.Status()
			st.State, st.Reason = string(ls.State), ls.Reason
			if !ls.Since.IsZero() {
				st.Since = ls.Since
			} else if r.connected {
				st.State = "connected" // it said ready before reporting
			}
			st.Reconnecting = ls.State == channel.Connecting && ls.Lost && time.Since(ls.Since) < ReadyGrace
		case r.connected:
			st.State = "connected"
		case r.disabled:
			st.State = "disabled"
		}
		out[i] = st
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name }) // not slices.SortFunc: bench/README.md, "Binary: sorts"
	return out
}

// Ready reports whether every expected channel receives (connected, or
// standing by for another replica), and each channel's state with its
// reason: a channel that is still connecting, lost its connection more
// than ReadyGrace ago or cannot run keeps the gateway unready.
func (g *Gateway) Ready() (bool, map[string]string) {
	out := map[string]string{}
	ready := true
	for _, st := range g.Channels() {
		ready = ready && st.Ready()
		out[st.Name] = st.String()
	}
	return ready, out
}

// RunAccount runs the receive loop of one channel account (a Telegram bot
// token, a Slack app) on the one replica the Elector makes its leader,
// and stands by on the others: account identifies it (its token is
// fine: only a hash of it leaves the process).
func (g *Gateway) RunAccount(ctx context.Context, ch channel.Channel, account string) error {
	key := "channel." + ch.Name() + "." + replica.AccountHash(ch.Name(), account)
	return g.Elector.Lead(ctx, key, func(ctx context.Context) error {
		g.log().Info("this replica receives", "channel", ch.Name())
		return g.RunChannel(ctx, ch)
	}, func() {
		g.log().Info("another replica receives", "channel", ch.Name())
		g.Standby(ch.Name())
	})
}

// RunChannel runs one channel until ctx ends, recording when it is ready.
func (g *Gateway) RunChannel(ctx context.Context, ch channel.Channel) error {
	name := ch.Name()
	link, _ := ch.(channel.Reporter)
	g.mu.Lock()
	r := g.channel(name)
	r.link, r.standby, r.connected, r.stopped = link, false, false, ""
	g.mu.Unlock()
	err := ch.Run(ctx, g.Inbox(name), func() { g.Connected(name, nil) })
	if err != nil && ctx.Err() == nil {
		g.Connected(name, err)
		g.log().Error("channel stopped", "channel", name, "error", err)
		return err
	}
	g.mu.Lock()
	if r.link == link {
		r.link, r.connected = nil, false
	}
	g.mu.Unlock()
	return err
}
