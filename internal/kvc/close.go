package kvc

import "github.com/pdhybrid/pdhybrid/internal/radix"

// Closing sessions. A source that knows a session has sent its last turn
// (a generator, or a trace whose turns were counted before the run) lets
// the simulator say so once that turn has ended. Unlike ForgetSession,
// which drops everything at once and so changes what later requests of
// other sessions see (the per-decoder session counts, the router's belief
// of what each decoder caches), closing is exact: a closed session's
// record stays while anything other requests read still counts it and may
// still move — a pin on a decoder, a path in a decoder's belief index, a
// prefill backup, a host-tier copy, a request in flight — and is dropped
// once none does, which an eviction report or a later sweep finds. What is
// dropped then is only the session's own history (its reject counts, its
// last decoder, its affinity), which nothing reads again because nothing
// of the session comes again. A whole-on-P hosting (KVC v3) does not hold
// the record: only the session's own next turn moves it off P, so the
// prefill worker's count of hosted sessions keeps it for good either way.

// CloseSession records that the session sends nothing more. Its P-router
// pin goes at once (only its own turns read it); the rest goes when it no
// longer counts anywhere.
func (x *Dispatcher) CloseSession(session string) { x.CloseSessionKey(SessionKey{ID: session}) }

// CloseSessionKey is CloseSession of a session the caller numbers.
func (x *Dispatcher) CloseSessionKey(session SessionKey) {
	s := x.sess(session)
	if s == nil || s.closed {
		return
	}
	s.closed = true
	if x.p != nil {
		x.p.ForgetKey(session)
	}
	if x.reap(s) {
		return
	}
	x.closing = append(x.closing, session)
	if len(x.closing) >= 2*x.closingKept+256 {
		x.sweepClosed()
	}
}

// reap drops a closed session's record if nothing but the session reads
// it any more, and reports whether it did.
func (x *Dispatcher) reap(s *sessState) bool {
	if !s.closed || s.pin >= 0 || s.backup >= 0 || s.inflight != 0 || s.onHost || s.onStore || s.pinHeld() {
		return false
	}
	for _, h := range s.handles {
		if h != (radix.Handle{}) {
			return false
		}
	}
	x.d.ForgetKey(s.key)
	x.sessions.Delete(s.key)
	return true
}

// sweepClosed reaps the closed sessions that stopped counting since they
// were closed; the ones that still count are kept for the next sweep. The
// next sweep comes when the list has doubled, so a close costs amortised
// O(1) and the list stays within twice what the decoders hold.
func (x *Dispatcher) sweepClosed() {
	kept := x.closing[:0]
	for _, id := range x.closing {
		if s := x.sess(id); s != nil && s.closed && !x.reap(s) {
			kept = append(kept, id)
		}
	}
	clear(x.closing[len(kept):])
	x.closing, x.closingKept = kept, len(kept)
}
