package budget

import (
	"context"
	"strings"

	"github.com/nbots/nb/gateway/replica"
)

// counts is how a ledger counts: alone (the counts of this process, as
// its file keeps them) or shared among replicas (the sums of every
// replica's, which the bus keeps). The two count differently, so each
// is an object of its own and the ledger asks the one it has, rather
// than branching on Shared at every step. Methods run under Ledger.mu.
type counts interface {
	// record counts u of src in session (the ledger's own file counts
	// were updated already).
	record(day string, src Source, session string, u Usage)
	// resetSession forgets session's count (the file's was deleted).
	resetSession(session string)
	// today is today's counts by source.
	today() map[Source]Usage
	// session is session's count.
	session(session string) Usage
	// run keeps the counts current until ctx ends (Ledger.Run).
	run(ctx context.Context) error
	// reserve adds r to the budgets the other replicas see, and says
	// whether their calls are in the way (shared only).
	reserve(ctx context.Context, r *Reservation, prompt int) (others bool, err error)
}

// alone is the counts of one gateway: the ledger's file, loaded when
// the ledger is first used.
type alone struct{ l *Ledger }

func (alone) record(string, Source, string, Usage) {}
func (alone) resetSession(string)                  {}

func (a alone) today() map[Source]Usage {
	out := make(map[Source]Usage, len(a.l.data.Today))
	for k, v := range a.l.data.Today {
		out[k] = v
	}
	return out
}

func (a alone) session(session string) Usage { return a.l.data.Sessions[session] }

// run has nothing to keep current: the file is written as counts come.
func (alone) run(context.Context) error { return nil }

func (alone) reserve(context.Context, *Reservation, int) (bool, error) { return false, nil }

// shared is the counts of replicas sharing the gateway's work, through
// counters every replica adds to (see shared.go).
type shared struct{ l *Ledger }

func (s shared) record(day string, src Source, session string, u Usage) {
	sh := &s.l.sh
	sh.init()
	for _, k := range []string{dayKey(day, src), sessionKey(session)} {
		sh.pending[k] = plus(sh.pending[k], u)
	}
}

func (s shared) resetSession(session string) {
	l := s.l
	l.sh.init()
	k := sessionKey(session)
	delete(l.sh.pending, k)
	delete(l.sh.inflight, k)
	l.sh.sums[k] = replica.Count{Revision: l.sh.sums[k].Revision, Deleted: true}
	l.sh.deletes[k] = true
	// The session's reservations start again too (running calls settle
	// into the new count; a stamp of the old key is void).
	g := gateSessionKey(session)
	l.sh.deletes[g] = true
	l.res.init()
	delete(l.res.at, g)
}

func (s shared) today() map[Source]Usage {
	l := s.l
	out := map[Source]Usage{}
	l.sh.init()
	prefix := dayKey(l.data.Day, "")
	for _, m := range []map[string]Usage{l.sh.pending, l.sh.inflight} {
		for k, u := range m {
			if src, ok := strings.CutPrefix(k, prefix); ok {
				out[Source(src)] = plus(out[Source(src)], u)
			}
		}
	}
	for k, c := range l.sh.sums {
		if src, ok := strings.CutPrefix(k, prefix); ok && !c.Deleted {
			out[Source(src)] = plus(out[Source(src)], toUsage(c))
		}
	}
	return out
}

func (s shared) session(session string) Usage {
	s.l.sh.init()
	return s.l.sh.used(sessionKey(session))
}

func (s shared) run(ctx context.Context) error { return s.l.runShared(ctx) }

func (s shared) reserve(ctx context.Context, r *Reservation, prompt int) (bool, error) {
	if s.l.Limits.DailyTokens <= 0 && s.l.Limits.SessionTokens <= 0 {
		return false, nil
	}
	return s.l.reserveShared(ctx, r, prompt)
}
