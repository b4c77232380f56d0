package agent

import (
	"context"
	"fmt"
	"strings"

	"github.com/nbots/nb/provider"
	"github.com/nbots/nb/tool"
)

// guard is what bounds every loop (functions, ReAct, plan) the same
// way: the round limit (safety.tools.rounds), the token budget
// (safety.tokens), the loop detector (safety.loops) and one compaction
// when the provider refuses the conversation as longer than the model's
// context. Each loop asks it before a request, after a round's calls
// and after a failed request.
type guard struct {
	a *Agent
	// steps is what a round is called in notices ("rounds of tool
	// calls", "ReAct steps", "planning steps"); rounds is the round
	// limit (0: none, a planner's tasks are its bound).
	steps  string
	rounds int
	usage  provider.Usage

	detector  *loopDetector
	warned    bool
	compacted bool
}

// newGuard is the guard of one exchange of a's loop, whose rounds are
// called steps; a round limit of 0 or less is DefaultRounds.
func (a *Agent) newGuard(steps string, rounds int) *guard {
	window := a.LoopWindow
	if window <= 0 {
		window = DefaultLoopWindow
	}
	return &guard{a: a, steps: steps, rounds: rounds, detector: newLoopDetector(window)}
}

// roundLimit is a's round limit (DefaultRounds when unset).
func (a *Agent) roundLimit() int {
	if a.MaxRounds <= 0 {
		return DefaultRounds
	}
	return a.MaxRounds
}

// stop says whether round may not be made (why and a notice, with a
// TurnLimit event), the rounds before it having been made: the round
// limit, or the token budget spent.
func (g *guard) stop(round int) (why, notice string) {
	a := g.a
	if g.rounds > 0 && round > g.rounds {
		notice = fmt.Sprintf("stopped after %d %s without an answer (infinite loop prevention; safety.tools.rounds sets the limit); the conversation is kept: send another message (\"continue\") to let the model go on", g.rounds, g.steps)
		a.emit(Event{Kind: TurnLimit, Round: g.rounds, Text: notice})
		return StopRoundLimit, notice
	}
	if used := g.usage.InputTokens + g.usage.OutputTokens; a.MaxTokens > 0 && used >= a.MaxTokens {
		notice = fmt.Sprintf("stopped after %d %s: they used %d tokens, the budget is %d (safety.tokens sets it); the conversation is kept: send another message (\"continue\") to let the model go on", round-1, g.steps, used, a.MaxTokens)
		a.emit(Event{Kind: TurnLimit, Round: round - 1, Text: notice})
		return StopTokenLimit, notice
	}
	return "", ""
}

// halt is the Result a loop ends with when round may not be made (see
// stop), nil when it may: the rounds before it were made.
func (g *guard) halt(round int, stream bool, pressure contextPressure) *Result {
	why, notice := g.stop(round)
	if why == "" {
		return nil
	}
	return g.result(stream, round-1, why, notice, pressure)
}

// loop records a round's calls. When the last calls repeat a pattern it
// returns, the first time, the warning to send the model (a
// LoopDetection event says it); when the pattern goes on after it, the
// notice the exchange stops with.
//
// Calls to a tool that waits (see Repeatable) are left out: calling it
// again with the same arguments is how a model waits longer.
func (g *guard) loop(calls []tool.Call) (warning, stop string) {
	kept := calls[:0:0]
	for _, c := range calls {
		if t, ok := g.a.Tools.Lookup(c.Name); ok {
			if r, ok := t.(Repeatable); ok && r.Repeatable() {
				continue
			}
		}
		kept = append(kept, c)
	}
	k, n := g.detector.add(kept)
	if k == 0 {
		return "", ""
	}
	if g.warned {
		stop = fmt.Sprintf("stopped: the model keeps repeating the same %s (%s) after it was warned; the conversation so far is kept", plural(k, "tool call", "tool calls"), strings.Join(g.detector.pattern(k), ", "))
		g.a.emit(Event{Kind: LoopDetection, Text: stop, IsError: true})
		return "", stop
	}
	g.warned = true
	warning = LoopWarning(n)
	g.a.emit(Event{Kind: LoopDetection, Text: warning})
	return warning, ""
}

// retry says whether a failed request should be sent again: the
// provider refused req as longer than the model's context (the estimate
// of four characters a token is only an estimate), nothing of an answer
// came, the exchange goes on, the guard has not compacted before, and
// build, asked again for the request once the agent squeezes it to half
// its size, gives a smaller one (see compact). It says so in a Warning.
func (g *guard) retry(ctx context.Context, err error, streamed bool, req provider.Request, build func() provider.Request) bool {
	if err == nil || streamed || g.compacted || ctx.Err() != nil || !provider.IsContextLength(err) {
		return false
	}
	g.compacted = true
	return g.a.compact(req, err, build)
}

// Repeatable is implemented by tools whose calls the loop detector
// leaves out when Repeatable returns true: tools that wait for
// something (the managed sub-agents' wait), which a model calls again
// with the same arguments to wait longer.
type Repeatable interface {
	Repeatable() bool
}

// result is a Result for an exchange a limit stopped after round rounds.
func (g *guard) result(stream bool, round int, why, notice string, pressure contextPressure) *Result {
	return &Result{Streamed: stream, Usage: g.usage, Rounds: round, FinishReason: why, Stopped: why, Notice: notice,
		ContextTokens: pressure.tokens, ContextBudget: g.a.Budget}
}
