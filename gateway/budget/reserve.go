package budget

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/nbots/nb/gateway/replica"
	"github.com/nbots/nb/provider"
)

// Checking a budget before a call and counting it after lets calls that
// start together all pass the check: 50 chats at once against 100 tokens
// spent 1,300. So a call reserves what it may cost before it starts (its
// prompt, whose size is known, and its answer's cap, maxTokens) and
// settles with what it cost. A call is admitted when the tokens used, the
// reservations of the calls running and its own prompt fit the budget;
// when only the running calls' reservations are in the way it waits for
// them to settle. A budget is then exceeded by at most one call's answer.
//
// Replicas share the reservations through the shared counters: each
// budget has a gate key holding the tokens settled through it ("used")
// and each replica's reservations ("res.<replica>", stamped
// "at.<replica>"). Adding a reservation to the gate returns, atomically,
// every other replica's: the last of two replicas to reserve sees the
// first. A replica that died with calls running leaves reservations that
// count for ReservationTTL after its last change, not for ever.

// ReservationTTL is how long a replica's reservations count without a
// change: longer than a model call lasts.
const ReservationTTL = 10 * time.Minute

// waitPoll is how often a call waiting for other replicas' reservations
// looks again (local ones wake it at once).
const waitPoll = 200 * time.Millisecond

// Reservation is what a call holds in the budgets while it runs. Settle
// it once, with what the call cost.
type Reservation struct {
	l       *Ledger
	session string
	src     Source
	tokens  int
	day     string
	gates   []string // the shared gate keys it was added to
	done    bool
}

// Reserve holds prompt+answer tokens of session's budgets for a call from
// src about to start, prompt being the estimated size of its request and
// answer its answer's cap (maxTokens; 0 if unknown). It waits while the
// running calls' reservations leave too little (until ctx ends), and
// returns *Exceeded when the budget cannot take the prompt.
func (l *Ledger) Reserve(ctx context.Context, session string, src Source, prompt, answer int) (*Reservation, error) {
	prompt, answer = max(prompt, 0), max(answer, 0)
	r := &Reservation{l: l, session: session, src: src, tokens: prompt + answer}
	for {
		wake, err := l.reserveLocal(r, prompt)
		if err == nil && wake == nil {
			var others bool
			others, err = l.counts().reserve(ctx, r, prompt)
			if err == nil && !others {
				return r, nil
			}
			l.releaseLocal(r)
			if err == nil {
				wake = l.changedCh() // other replicas' calls are in the way
			}
		}
		if err != nil {
			return nil, err
		}
		poll := time.NewTimer(waitPoll)
		select {
		case <-ctx.Done():
			poll.Stop()
			return nil, ctx.Err()
		case <-wake:
		case <-poll.C:
		}
		poll.Stop()
	}
}

// Settle counts what the call cost and frees its reservation. A call that
// failed settles with what it is known to have cost (nothing, often).
func (r *Reservation) Settle(u Usage) {
	if r == nil || r.done {
		return
	}
	r.done = true
	l := r.l
	if u.Total() > 0 {
		l.Record(r.session, r.src, u)
	}
	if len(r.gates) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		l.gateAdd(ctx, r.gates, -r.tokens, u.Total())
	}
	l.releaseLocal(r)
}

// reserveLocal admits r against this process's view; it returns a
// channel to wait on when running calls are in the way.
func (l *Ledger) reserveLocal(r *Reservation, prompt int) (<-chan struct{}, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.roll(now)
	l.res.init()
	day := l.data.Day
	type budget struct {
		name             string
		limit, used, res int
	}
	var budgets []budget
	if lim := l.Limits.DailyTokens; lim > 0 {
		budgets = append(budgets, budget{"daily", lim, total(l.todayBySource()), l.res.day[day]})
	}
	if lim := l.Limits.SessionTokens; lim > 0 {
		budgets = append(budgets, budget{"session", lim, l.sessionUsed(r.session).Total(), l.res.session[r.session]})
	}
	for _, b := range budgets {
		if err := l.admit(b.name, b.limit, b.used, b.res, prompt, now); err != nil {
			return nil, err
		}
		if b.used+b.res+prompt > b.limit {
			return l.changedLocked(), nil // the running calls may leave room
		}
	}
	r.day = day
	l.res.day[day] += r.tokens
	l.res.session[r.session] += r.tokens
	return nil, nil
}

// admit returns *Exceeded when a budget of limit, used tokens used, cannot
// take a prompt of prompt tokens even once the reserved tokens of the
// running calls are settled.
func (l *Ledger) admit(budget string, limit, used, reserved, prompt int, now time.Time) error {
	e := &Exceeded{Budget: budget, Limit: limit, Used: used, now: now}
	if budget == "daily" {
		e.Resets = l.nextDay(now)
	}
	if used >= limit {
		return e
	}
	if reserved == 0 && used+prompt > limit {
		e.Needed = prompt
		return e
	}
	return nil
}

// releaseLocal frees r's local reservation and wakes the waiting calls.
func (l *Ledger) releaseLocal(r *Reservation) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r.day == "" {
		return
	}
	l.res.init()
	if l.res.day[r.day] -= r.tokens; l.res.day[r.day] <= 0 {
		delete(l.res.day, r.day)
	}
	if l.res.session[r.session] -= r.tokens; l.res.session[r.session] <= 0 {
		delete(l.res.session, r.session)
	}
	r.day = ""
	l.wakeLocked()
}

// reservations are the tokens held by this process's running calls.
type reservations struct {
	day     map[string]int // by day
	session map[string]int // by session
	changed chan struct{}  // closed when a reservation is freed
	id      string         // this replica's name in the gates
	at      map[string]int64
}

func (r *reservations) init() {
	if r.day == nil {
		r.day, r.session, r.at = map[string]int{}, map[string]int{}, map[string]int64{}
		var b [6]byte
		rand.Read(b[:]) //nolint:errcheck // never fails
		r.id = hex.EncodeToString(b[:])
	}
}

func (l *Ledger) changedLocked() <-chan struct{} {
	if l.res.changed == nil {
		l.res.changed = make(chan struct{})
	}
	return l.res.changed
}

func (l *Ledger) changedCh() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.changedLocked()
}

func (l *Ledger) wakeLocked() {
	if l.res.changed != nil {
		close(l.res.changed)
		l.res.changed = nil
	}
}

// gateDayKey and gateSessionKey are the shared keys of the reservations
// of a day's budget and of a session's.
func gateDayKey(day string) string         { return "gate.day." + day }
func gateSessionKey(session string) string { return "gate." + sessionKey(session) }

// reserveShared adds r to the gates of its budgets and says whether
// other replicas' running calls leave too little room (r is then taken
// out of the gates again); *Exceeded when the budget cannot take the
// prompt at all. When the counters cannot be reached the local check
// stands, with a warning.
func (l *Ledger) reserveShared(ctx context.Context, r *Reservation, prompt int) (others bool, err error) {
	type gate struct {
		key, budget string
		limit, view int
	}
	var gates []gate
	l.mu.Lock()
	now := l.now()
	if lim := l.Limits.DailyTokens; lim > 0 {
		gates = append(gates, gate{gateDayKey(r.day), "daily", lim, total(l.todayBySource())})
	}
	if lim := l.Limits.SessionTokens; lim > 0 {
		gates = append(gates, gate{gateSessionKey(r.session), "session", lim, l.sessionUsed(r.session).Total()})
	}
	// The gates as last watched: while they show the running calls in
	// the way, waiting costs the counters nothing (a watched change
	// wakes the waiting calls).
	l.sh.init()
	for _, g := range gates {
		c := l.sh.sums[g.key]
		if c.Deleted || c.Values == nil {
			continue
		}
		used, held := max(int(c.Values["used"]), g.view), reserved(c, now)-l.myReserved(g.key)
		if held > 0 && used+held+prompt > g.limit {
			l.mu.Unlock()
			return true, nil
		}
	}
	l.mu.Unlock()
	for _, g := range gates {
		r.gates = append(r.gates, g.key)
		c, err := l.gateAdd(ctx, []string{g.key}, r.tokens, 0)
		if err != nil {
			if l.Warn != nil {
				l.Warn("budget: the replicas' reservations cannot be reached (this replica's count decides): " + err.Error())
			}
			r.gates = r.gates[:len(r.gates)-1]
			continue
		}
		used, held := max(int(c.Values["used"]), g.view), reserved(c, now)-r.tokens
		if aerr := l.admit(g.budget, g.limit, used, held, prompt, now); aerr != nil || used+held+prompt > g.limit {
			// Taken out again, to wait for the others or to refuse.
			uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			l.gateAdd(uctx, r.gates, -r.tokens, 0)
			cancel()
			r.gates = nil
			return aerr == nil, aerr
		}
	}
	return false, nil
}

// myReserved is what this replica's running calls hold in the gate key,
// as it last added to it (l.mu held).
func (l *Ledger) myReserved(key string) int {
	if strings.HasPrefix(key, "gate.day.") {
		return l.res.day[strings.TrimPrefix(key, "gate.day.")]
	}
	for s, n := range l.res.session {
		if gateSessionKey(s) == key {
			return n
		}
	}
	return 0
}

// reserved is what the replicas' running calls hold in a gate, those of
// a replica silent for ReservationTTL left out.
func reserved(c replica.Count, now time.Time) int {
	n := int64(0)
	for name, v := range c.Values {
		id, ok := strings.CutPrefix(name, "res.")
		if !ok || v <= 0 {
			continue
		}
		if at := c.Values["at."+id]; now.Unix()-at > int64(ReservationTTL/time.Second) {
			continue
		}
		n += v
	}
	return int(n)
}

// gateAdd adds tokens to this replica's reservations in the gates keys,
// and used to their tokens used, stamping the change.
func (l *Ledger) gateAdd(ctx context.Context, keys []string, tokens, used int) (replica.Count, error) {
	// One change at a time: the stamp is set by adding the difference
	// from the value this replica, its only writer, last wrote.
	l.gateMu.Lock()
	defer l.gateMu.Unlock()
	var last replica.Count
	var firstErr error
	for _, k := range keys {
		l.mu.Lock()
		l.res.init()
		id, now := l.res.id, l.now().Unix()
		delta := map[string]int64{"res." + id: int64(tokens), "at." + id: now - l.res.at[k]}
		if used != 0 {
			delta["used"] = int64(used)
		}
		l.mu.Unlock()
		c, err := l.Shared.Add(ctx, k, delta)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		l.mu.Lock()
		l.res.at[k] = c.Values["at."+id]
		l.mu.Unlock()
		last = c
	}
	if firstErr != nil && tokens < 0 && l.Warn != nil {
		l.Warn(fmt.Sprintf("budget: freeing a reservation of %d tokens among the replicas: %v (it lapses after %s)", -tokens, firstErr, ReservationTTL))
	}
	return last, firstErr
}

// ReserveCall is Reserve for the gateway's Budget seam: settle is
// called with the call's usage (zero when it failed).
func (l *Ledger) ReserveCall(ctx context.Context, session, source string, prompt, answer int) (settle func(provider.Usage), err error) {
	r, err := l.Reserve(ctx, session, Source(source), prompt, answer)
	if err != nil {
		return nil, err
	}
	return func(u provider.Usage) { r.Settle(Usage{u.InputTokens, u.OutputTokens}) }, nil
}
