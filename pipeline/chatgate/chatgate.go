// Package chatgate asks a pipeline's human gates in a chat of the
// gateway's channels: a gate node with human.channel="telegram:<chat>"
// (any channel of the gateway configuration: "slack:<channel>",
// "matrix:<room>", …) posts its question, with its choices, in that chat,
// and takes the first answer that names a choice from one of the owner's
// identities (the channel's allowFrom, "*" excepted), so a gate is
// approved from a phone. Others' messages are ignored; a question's
// timeout takes the gate's default as on the terminal. Questions
// without human.channel go to the fallback interviewer.
package chatgate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nbots/nb/gateway/access"
	"github.com/nbots/nb/gateway/bus"
	"github.com/nbots/nb/gateway/channel"
	"github.com/nbots/nb/gateway/channels"
	"github.com/nbots/nb/gateway/config"
	"github.com/nbots/nb/gateway/webgate"
	"github.com/nbots/nb/pipeline/handler"
)

// Attr is the node attribute that names the chat of a gate
// ("<channel>:<chat id>"); the human handler copies it into the
// question's metadata under the same key.
const Attr = "human.channel"

// Gate is a handler.Interviewer that asks in chats. It opens each
// channel it needs once, on the first question for it, and keeps its
// receive loop running until Close.
type Gate struct {
	chs       config.Channels
	factories []channels.Factory
	env       channel.Env
	fallback  handler.Interviewer
	// Source names the configuration in messages (its path).
	Source string
	// WebDir is where the gates asked in the gateway's web chat
	// ("web:<chat>") meet the running gateway (gatewayrun.Files.WebGates;
	// "": the web chat cannot be asked).
	WebDir string
	now    func() time.Time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	open    map[string]*opened          // by channel name
	waiting map[string]chan bus.Inbound // by channel name and chat
	chats   map[string]*sync.Mutex      // one question at a time per chat
}

// opened is a running channel.
type opened struct {
	ready chan struct{} // closed once connected, or failed
	ch    channel.Channel
	allow []string
	// anyone: every sender may answer (the web chat, whose listener
	// authenticated its users already).
	anyone bool
	err    error // set before ready closes when it failed to start
	dead   chan struct{}
	final  error // Run's final error, set before dead closes
}

// New returns a gate over the channels of a gateway configuration (chs,
// its channels section), built with factories (channels.Builtin()) and
// env (the channels' state folder keeps their receive positions).
// Questions without human.channel go to fallback (nil: AutoApprove).
func New(chs config.Channels, factories []channels.Factory, env channel.Env, fallback handler.Interviewer) *Gate {
	if fallback == nil {
		fallback = handler.AutoApprove{}
	}
	g := &Gate{chs: chs, factories: factories, env: env, fallback: fallback, now: time.Now,
		open: map[string]*opened{}, waiting: map[string]chan bus.Inbound{}, chats: map[string]*sync.Mutex{}}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	return g
}

// Close stops the channels' receive loops.
func (g *Gate) Close() {
	g.cancel()
	g.wg.Wait()
}

// Inform passes to the fallback.
func (g *Gate) Inform(message, stage string) { g.fallback.Inform(message, stage) }

// Target parses a human.channel value: "<channel>:<chat id>".
func Target(v string) (name, chat string, err error) {
	name, chat, ok := strings.Cut(strings.TrimSpace(v), ":")
	if !ok || name == "" || strings.TrimSpace(chat) == "" {
		return "", "", fmt.Errorf("%s=%q: want \"<channel>:<chat id>\", such as \"telegram:123456789\"", Attr, v)
	}
	return name, strings.TrimSpace(chat), nil
}

// Ask asks q in the chat its metadata names, else through the fallback.
func (g *Gate) Ask(ctx context.Context, q handler.Question) (handler.Answer, error) {
	v, _ := q.Metadata[Attr].(string)
	if v == "" {
		return g.fallback.Ask(ctx, q)
	}
	name, chat, err := Target(v)
	if err != nil {
		return handler.Answer{}, err
	}
	o, err := g.channel(ctx, name)
	if err != nil {
		return handler.Answer{}, err
	}
	key := name + "\x00" + chat
	g.mu.Lock()
	lock := g.chats[key]
	if lock == nil {
		lock = &sync.Mutex{}
		g.chats[key] = lock
	}
	g.mu.Unlock()
	lock.Lock()
	defer lock.Unlock()

	in := make(chan bus.Inbound, 64)
	g.mu.Lock()
	g.waiting[key] = in
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.waiting, key)
		g.mu.Unlock()
	}()
	// A message older than the question cannot answer it (a platform
	// that replays what it had not confirmed); platforms date messages
	// to the second.
	asked := g.now().Truncate(time.Second)
	send := func(text string) error {
		_, err := o.ch.Send(ctx, bus.Outbound{Kind: bus.Message, Channel: name, ChatID: chat, Content: text})
		if err != nil {
			return fmt.Errorf("%s: ask in %s chat %s: %w", q.Stage, name, chat, err)
		}
		return nil
	}
	if p, ok := o.ch.(poster); ok {
		withdraw, err := p.Post(ctx, chat, questionText(q))
		if err != nil {
			return handler.Answer{}, fmt.Errorf("%s: %w", q.Stage, err)
		}
		defer withdraw()
	} else if err := send(questionText(q)); err != nil {
		return handler.Answer{}, err
	}
	var timeout <-chan time.Time
	if q.Timeout > 0 {
		t := time.NewTimer(q.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return handler.Answer{}, ctx.Err()
		case <-o.dead:
			return handler.Answer{}, fmt.Errorf("%s: the %s channel stopped while waiting for an answer: %v", q.Stage, name, o.final)
		case <-timeout:
			note := "No answer in time"
			if q.Default != nil {
				note += ": taking the default, " + optionText(q.Default.Selected, q.Default.Value)
			}
			_ = send(note + ".") // the run goes on whether this reaches the chat or not
			return handler.Answer{Value: handler.TimedOut}, nil
		case m := <-in:
			if m.Timestamp.Before(asked) && !m.Timestamp.IsZero() {
				continue
			}
			if !o.anyone && !owner(name, o.allow, m.SenderID) {
				g.env.Log().Info("pipeline gate: ignored an answer from outside allowFrom", "channel", name, "chat", chat, "sender", m.SenderID)
				continue
			}
			a, ok := parseAnswer(q, m.Content)
			if !ok {
				if err := send("Answer with " + choicesHint(q) + "."); err != nil {
					return handler.Answer{}, err
				}
				continue
			}
			_ = send("Taken: " + optionText(a.Selected, a.Value) + ".")
			return a, nil
		}
	}
}

// poster is a channel that keeps a question posted in a chat until it
// is withdrawn (webgate.Channel: a page opened later shows it too).
type poster interface {
	Post(ctx context.Context, chat, text string) (withdraw func(), err error)
}

// owner reports whether sender is one of the owner's identities in
// allow: "*" lets anyone chat with the assistant, never approve a gate.
func owner(name string, allow []string, sender string) bool {
	var named []string
	for _, e := range allow {
		if strings.TrimSpace(e) != "*" {
			named = append(named, e)
		}
	}
	return access.Matches(name, named, sender)
}

// channel starts the channel name once and waits until it connected.
func (g *Gate) channel(ctx context.Context, name string) (*opened, error) {
	g.mu.Lock()
	o := g.open[name]
	if o == nil {
		o = &opened{ready: make(chan struct{}), dead: make(chan struct{})}
		g.open[name] = o
		g.wg.Add(1)
		go g.start(name, o)
	}
	g.mu.Unlock()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-o.ready:
	}
	if o.err != nil {
		return nil, o.err
	}
	return o, nil
}

func (g *Gate) where() string {
	if g.Source == "" {
		return "the gateway configuration"
	}
	return g.Source
}

// start builds and runs channel name until Close.
func (g *Gate) start(name string, o *opened) {
	defer g.wg.Done()
	var readyOnce sync.Once
	ready := func() { readyOnce.Do(func() { close(o.ready) }) }
	fail := func(err error) {
		o.err = err
		ready()
		close(o.dead)
	}
	if name == webgate.Name {
		if g.WebDir == "" {
			fail(fmt.Errorf("%s: the gateway's web chat cannot be asked from here (no gateway state folder)", Attr))
			return
		}
		o.ch, o.anyone = &webgate.Channel{Dir: g.WebDir}, true
		g.run(name, o, ready)
		return
	}
	f, ok := channels.Find(g.factories, name)
	if !ok {
		fail(fmt.Errorf("%s: no channel %q in this nb (%s)", Attr, name, factoryNames(g.factories)))
		return
	}
	raw, ok := g.chs.Each[name]
	if !ok {
		fail(fmt.Errorf("%s: channels.%s is not in %s: configure the channel there (as nb gateway uses it)", Attr, name, g.where()))
		return
	}
	common, err := g.chs.Channel(name)
	if err != nil {
		fail(fmt.Errorf("%s: %w", g.where(), err))
		return
	}
	if !slicesAnyNamed(common.AllowFrom) {
		fail(fmt.Errorf("%s: channels.%s.allowFrom in %s names nobody (\"*\" does not count): no answer could be taken; add your id there", Attr, name, g.where()))
		return
	}
	ch, err := f.New(raw, g.env)
	if err != nil {
		fail(fmt.Errorf("%s: channels.%s in %s: %w", Attr, name, g.where(), err))
		return
	}
	o.ch, o.allow = ch, common.AllowFrom
	g.run(name, o, ready)
}

// run runs o's channel until Close.
func (g *Gate) run(name string, o *opened, ready func()) {
	err := o.ch.Run(g.ctx, inbox{g: g, name: name}, ready)
	if err == nil {
		err = errors.New("it stopped")
	}
	o.final = err
	if o.err == nil {
		select {
		case <-o.ready:
		default:
			o.err = fmt.Errorf("%s: the %s channel did not start: %w", Attr, name, err)
		}
	}
	ready()
	close(o.dead)
}

func slicesAnyNamed(allow []string) bool {
	for _, e := range allow {
		if e = strings.TrimSpace(e); e != "" && e != "*" {
			return true
		}
	}
	return false
}

func factoryNames(fs []channels.Factory) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

// inbox hands what a channel reads to the question waiting in its chat.
type inbox struct {
	g    *Gate
	name string
}

// Publish implements channel.Inbox: a message goes to the question
// waiting in its chat, if any; others are dropped (a gate's chat is not
// a conversation with the assistant).
func (in inbox) Publish(_ context.Context, m bus.Inbound) error {
	in.g.mu.Lock()
	w := in.g.waiting[in.name+"\x00"+m.ChatID]
	in.g.mu.Unlock()
	if w != nil {
		select {
		case w <- m:
		default:
		}
	}
	return nil
}

// Admits implements channel.Admitter: no media are ever fetched.
func (inbox) Admits(bus.Inbound) bool { return false }

var _ channel.Admitter = inbox{}

// questionText is the question as posted: the text, the choices, how to
// answer and the timeout.
func questionText(q handler.Question) string {
	var b strings.Builder
	b.WriteString(q.Text)
	if q.Stage != "" {
		fmt.Fprintf(&b, "\n(pipeline gate %s)", q.Stage)
	}
	b.WriteString("\n")
	for _, o := range q.Options {
		b.WriteString("\n" + optionText(&o, o.Key))
	}
	b.WriteString("\n\nAnswer with " + choicesHint(q) + ".")
	if q.Timeout > 0 {
		fmt.Fprintf(&b, " Without an answer in %s", q.Timeout)
		if q.Default != nil {
			b.WriteString(": " + optionText(q.Default.Selected, q.Default.Value))
		}
		b.WriteString(".")
	}
	return b.String()
}

// optionText shows an option with its key: its label when the label
// carries the key already ("[A] Approve"), else "[K] label".
func optionText(o *handler.Option, value string) string {
	if o == nil {
		return value
	}
	l := strings.TrimSpace(o.Label)
	for _, p := range []string{"[" + o.Key + "]", o.Key + ")", o.Key + " -"} {
		if strings.HasPrefix(l, p) {
			return l
		}
	}
	if l == "" {
		return "[" + o.Key + "]"
	}
	return "[" + o.Key + "] " + l
}

func choicesHint(q handler.Question) string {
	switch q.Type {
	case handler.YesNo, handler.Confirmation:
		return "yes or no"
	case handler.Freeform:
		return "your answer"
	}
	keys := make([]string, len(q.Options))
	for i, o := range q.Options {
		keys[i] = o.Key
	}
	switch len(keys) {
	case 0:
		return "a choice"
	case 1:
		return keys[0]
	}
	return "one of " + strings.Join(keys[:len(keys)-1], ", ") + " or " + keys[len(keys)-1]
}

// parseAnswer reads a chat message as an answer to q: a choice's key
// (as "A" or "[A]"), its label, or its label without the key, ignoring
// case (handler.MatchOption). Anything else is no answer (unlike §4.6's fallback to the first
// choice: a remark in the chat must not approve a gate).
func parseAnswer(q handler.Question, text string) (handler.Answer, bool) {
	t := strings.TrimSpace(text)
	if t == "" {
		return handler.Answer{}, false
	}
	switch q.Type {
	case handler.Freeform:
		return handler.Answer{Value: t, Text: t}, true
	case handler.YesNo, handler.Confirmation:
		switch strings.ToLower(strings.Trim(t, ".! ")) {
		case "yes", "y":
			return handler.Answer{Value: handler.Yes, Text: t}, true
		case "no", "n":
			return handler.Answer{Value: handler.No, Text: t}, true
		}
		return handler.Answer{}, false
	}
	o, ok := handler.MatchOption(t, q.Options)
	if !ok { // "[A]"
		o, ok = handler.MatchOption(strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(t, "["), "]")), q.Options)
	}
	if !ok {
		return handler.Answer{}, false
	}
	return handler.Answer{Value: o.Key, Selected: &o, Text: t}, true
}
