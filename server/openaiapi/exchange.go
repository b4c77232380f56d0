package openaiapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nbots/nb/agent"
	"github.com/nbots/nb/bot"
	"github.com/nbots/nb/cartridge"
	"github.com/nbots/nb/media"
	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/server"
	"github.com/nbots/nb/state"
	"github.com/nbots/nb/tool"
)

// turn is one exchange a request asks for, in nb's terms.
type turn struct {
	bot   *bot.Bot
	model string
	// history is the conversation before the exchange; input, when set,
	// is the new user message (it goes through the cartridge's input
	// adapter); without it the exchange continues the conversation (the
	// client sent tool results).
	history []state.Event
	input   *userInput
	// system is the client's system text.
	system   string
	owner    string
	external []tool.Spec
	override *provider.Override
	stop     []string
	endUser  string
	// whole is set when the client did not ask for a stream: the
	// provider is not asked for one either.
	whole bool
	// lost counts the server's parts of tool rounds the client referred
	// to that are gone.
	lost int
}

type userInput struct {
	text   string
	images []media.Image
}

// sink receives the answer as it is made: visible text (rounds separated
// by a blank line) and reasoning.
type sink interface {
	text(delta string)
	reasoning(delta string)
}

// outcome is what an exchange produced.
type outcome struct {
	res       *agent.Result
	text      string
	reasoning string
	// calls are the calls to the client's tools, with the ids given to
	// the client.
	calls []clientCall
	// conversation is the whole conversation after the exchange, with the
	// provider's call ids.
	conversation []state.Event
}

// clientCall is a call to one of the client's tools.
type clientCall = state.ToolCall

// run runs t, passing the answer to s as it comes.
func (h *Handler) run(ctx context.Context, t *turn, s sink) (out *outcome, err error) {
	if h.admit != nil {
		if !admitted(ctx) {
			run, done, refused := h.admit(ctx, false)
			if refused != nil {
				return nil, refused
			}
			defer done()
			ctx = run
		}
		defer func() {
			// A run the server stopped says why: its deadline, or the
			// server stopping (a client gone is answered by nobody).
			if err != nil && ctx.Err() != nil {
				switch cause := context.Cause(ctx); {
				case errors.Is(cause, server.ErrRunTimeout):
					err = &Error{Status: http.StatusGatewayTimeout, Message: fmt.Sprintf("model %s: %v", t.model, cause), Type: "server_error", Code: "timeout"}
				case errors.Is(cause, server.ErrShutdown):
					err = &Error{Status: http.StatusServiceUnavailable, Message: fmt.Sprintf("model %s: the exchange was stopped: %v", t.model, cause), Type: "server_error", Code: "shutting_down", RetryAfter: time.Second}
				}
			}
		}()
	}
	mem := agent.NewMemory(t.history...)
	c := &collector{sink: s}
	x := bot.Exchange{Mode: cartridge.Eval, Conversation: mem, EndUser: t.endUser, OnEvent: c.on,
		Confirmer: h.confirmer, External: t.external, System: t.system, Override: t.override, Stop: t.stop, Whole: t.whole}
	var res *agent.Result
	if t.input != nil {
		res, err = t.bot.Ask(ctx, x, t.input.text, t.input.images...)
	} else {
		res, err = t.bot.Continue(ctx, x)
	}
	if err != nil {
		server.RunFailed(ctx, err)
		return nil, err
	}
	if res.Notice != "" {
		// A limit stopped the exchange before an answer: the client
		// reads why and how to go on where the answer would be, and the
		// finish reason says it is incomplete.
		c.roundText = false
		c.emit("[nb: " + res.Notice + "]")
	}
	out = &outcome{res: res, text: c.all.String(), reasoning: c.thought.String(), conversation: mem.History()}
	if len(res.Pending) > 0 {
		recorded := out.conversation[len(t.history):]
		if t.input != nil && len(recorded) > 0 && recorded[0].Who == state.RoleUser {
			recorded = recorded[1:]
		}
		out.calls = h.keepRound(ctx, t.owner, recorded, res.Pending)
	}
	return out, nil
}

// collector turns an exchange's events into the answer a client sees:
// the text of every round, a blank line between two rounds' texts.
type collector struct {
	sink      sink
	all       strings.Builder
	thought   strings.Builder
	roundText bool // the current round has shown text
}

func (c *collector) on(ev agent.Event) {
	switch ev.Kind {
	case agent.RoundStart:
		c.roundText = false
	case agent.TextDelta:
		c.emit(ev.Text)
	case agent.Reasoning:
		if ev.Text != "" {
			c.thought.WriteString(ev.Text)
			if c.sink != nil {
				c.sink.reasoning(ev.Text)
			}
		}
	case agent.RoundEnd:
		// A cartridge that does not stream shows no deltas: the text of a
		// round with tool calls is shown when the round ends, the final
		// answer with the Answer event (after the output adapter).
		if len(ev.Calls) > 0 && !c.roundText {
			c.emit(ev.Text)
		}
	case agent.Answer:
		if !c.roundText {
			c.emit(ev.Text)
		}
	}
}

func (c *collector) emit(text string) {
	if text == "" {
		return
	}
	if !c.roundText && c.all.Len() > 0 {
		c.all.WriteString("\n\n")
		if c.sink != nil {
			c.sink.text("\n\n")
		}
	}
	c.roundText = true
	c.all.WriteString(text)
	if c.sink != nil {
		c.sink.text(text)
	}
}

// The server's part of a tool round. When the model calls the cartridge's
// tools and the client's in one exchange, the client receives only its
// own calls; the server keeps what the exchange recorded (its calls, their
// results, and the rounds before) under a key, and the ids it gives the
// client end with roundMark and the key. When the client sends the
// conversation back, the assistant message holding such ids is replaced
// by what the server kept, so the model sees its rounds whole.
const (
	roundMark   = "_nb"
	roundKeyLen = 16 // hex digits
)

// keptRound is the server's part of a tool round, kept for its owner.
type keptRound struct {
	events []state.Event
}

// markID is the id given to the client for call id of the round kept
// under key.
func markID(id, key string) string { return id + roundMark + key }

// splitID undoes markID: the provider's id and the key, "" when id has
// no mark.
func splitID(id string) (string, string) {
	n := len(id) - roundKeyLen - len(roundMark)
	if n < 0 || id[n:n+len(roundMark)] != roundMark {
		return id, ""
	}
	key := id[n+len(roundMark):]
	for i := 0; i < len(key); i++ {
		if c := key[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return id, ""
		}
	}
	return id[:n], key
}

func newKey() string {
	var b [roundKeyLen / 2]byte
	rand.Read(b[:]) //nolint:errcheck // never fails
	return hex.EncodeToString(b[:])
}

// keepRound returns the client's calls of an exchange that ended with
// pending calls; recorded is what the exchange recorded after the user's
// message. When that is more than the one assistant message the client
// will send back (server calls, earlier rounds, reasoning or provider data
// to send back), it is kept and the ids are marked.
func (h *Handler) keepRound(ctx context.Context, owner string, recorded []state.Event, pending []tool.Call) []clientCall {
	var last *state.Event
	for i := len(recorded) - 1; i >= 0; i-- {
		if recorded[i].Who == state.RoleAI {
			last = &recorded[i]
			break
		}
	}
	var calls []clientCall
	all := 0
	if last != nil {
		isPending := map[string]bool{}
		for _, p := range pending {
			isPending[p.ID] = true
		}
		for _, c := range last.ToolCalls {
			all++
			if isPending[c.ID] {
				calls = append(calls, c)
			}
		}
	}
	whole := len(recorded) == 1 && last != nil && all == len(calls) && last.Reasoning == "" && len(last.Extra) == 0
	if whole {
		return calls
	}
	key := newKey()
	if ok, err := h.rounds.Put(ctx, key, owner, &keptRound{events: recorded}, eventsSize(recorded)); err != nil {
		h.logger(ctx).Warn("a tool round could not be kept: the model will see only the client's part of it", "error", err.Error())
		return calls
	} else if !ok {
		h.logger(ctx).Warn("a tool round is too large to keep: the model will see only the client's part of it", "bytes", eventsSize(recorded))
		return calls
	}
	for i := range calls {
		calls[i].ID = markID(calls[i].ID, key)
	}
	return calls
}

// restoreRounds puts back the server's part of the tool rounds the
// client's conversation refers to, and takes the marks off the ids. It
// returns how many were gone (expired, or lost in a restart).
func (h *Handler) restoreRounds(ctx context.Context, owner string, events []state.Event) ([]state.Event, int, error) {
	marked := false
	for _, ev := range events {
		if ev.Who == state.RoleTool {
			if id := ev.Result.ID; id != "" {
				if _, key := splitID(id); key != "" {
					marked = true
					break
				}
			}
		}
		if ev.Who == state.RoleAI {
			for _, c := range ev.ToolCalls {
				if _, key := splitID(c.ID); key != "" {
					marked = true
				}
			}
		}
	}
	if !marked {
		return events, 0, nil
	}
	out := make([]state.Event, 0, len(events))
	lost := 0
	for _, ev := range events {
		switch ev.Who {
		case state.RoleTool:
			if id := ev.Result.ID; id != "" {
				if orig, key := splitID(id); key != "" {
					ev.Result.ID = orig
				}
			}
		case state.RoleAI:
			calls := slices.Clone(ev.ToolCalls)
			key := ""
			for _, c := range calls {
				if _, k := splitID(c.ID); k != "" {
					key = k
					break
				}
			}
			if key == "" {
				break
			}
			kept, ok, err := h.rounds.Get(ctx, key, owner)
			if err != nil {
				return nil, 0, storeError(err)
			}
			if ok {
				out = append(out, kept.events...)
				continue
			}
			lost++
			for i := range calls {
				calls[i].ID, _ = splitID(calls[i].ID)
			}
			ev.ToolCalls = calls
		}
		out = append(out, ev)
	}
	return out, lost, nil
}

// eventsSize estimates the memory events take, for the stores' bounds.
func eventsSize(events []state.Event) int64 {
	var n int64
	for _, ev := range events {
		n += 128 + int64(len(agent.Text(ev.Message)))
		for _, img := range ev.Images {
			n += int64(len(img.Data) + len(img.URL))
		}
		for _, c := range ev.ToolCalls {
			n += 64 + int64(len(c.ID)+len(c.Name)+len(c.Arguments))
		}
		n += int64(len(ev.Reasoning))
		if ev.Extra != nil {
			n += 1024
		}
	}
	return n
}

// lostHeader tells the client, and the log, that the server's part of
// tool rounds it referred to is gone.
const lostHeader = "X-Nb-Tool-Rounds-Lost"

func (h *Handler) reportLost(w http.ResponseWriter, r *http.Request, t *turn) {
	if t.lost == 0 {
		return
	}
	w.Header().Set(lostHeader, itoa(t.lost))
	h.logger(r.Context()).Warn("the server's part of earlier tool rounds is gone (expired, or lost in a restart): the model sees only the client's part",
		"model", t.model, "rounds", t.lost)
}
