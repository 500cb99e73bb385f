package kvc

import "github.com/pdhybrid/pdhybrid/internal/radix"

// Several gateway replicas each run a dispatcher of their own, and no
// router state is shared between them: a replica that never routed a
// session has no belief of where it lives. The decoders know. Resident
// takes a decoder's own answer to a residency probe and makes it this
// dispatcher's belief, so Algorithm 1's sticky term and prefix overlap
// point at the decoder that holds the session and Algorithm 2 (asked of
// that decoder) admits a direct append. A wrong or stale answer costs one
// refused admission: the decoder stays authoritative.

// Pinned says whether this dispatcher believes some decoder holds the
// session (the question a replica asks before it probes).
func (x *Dispatcher) Pinned(session string) bool {
	s := x.sess(SessionKey{ID: session})
	return s != nil && s.pin >= 0
}

// Resident records that decoder d reported holding the session, its cached
// prefix being the first blocks of the request about to be dispatched
// (blocks) and tokens its size in tokens.
func (x *Dispatcher) Resident(session string, d int, blocks []uint64, tokens int) {
	if session == "" || d < 0 || d >= len(x.d.names) {
		return
	}
	s := x.session(SessionKey{ID: session})
	if s.pin != d {
		x.unpin(s.key)
		x.onD[d]++
	}
	s.pin, s.last, s.resident, s.seen = d, d, tokens, true
	if s.handles == nil {
		s.handles = make([]radix.Handle, len(x.d.names))
	}
	s.handles[d] = x.d.PinTo(d, session, blocks)
}

// ForgetSession drops everything the dispatcher holds about a session —
// its residency belief, pins and reject counts — when the gateway has not
// seen it for a long time, so a long-running gateway's memory follows its
// live sessions. If the session comes back, it is routed as one this
// dispatcher never saw: the residency probe and the decoders' admission
// answers find it again.
func (x *Dispatcher) ForgetSession(session string) { x.ForgetSessionKey(SessionKey{ID: session}) }

// ForgetSessionKey is ForgetSession of a session the caller numbers.
func (x *Dispatcher) ForgetSessionKey(session SessionKey) {
	s := x.sess(session)
	if s == nil {
		return
	}
	x.unpin(session)
	x.setOnP(s, 0) // no longer hosted whole on a prefill worker (v3)
	x.pinForget(s, -1)
	x.sessions.Delete(session)
	x.d.ForgetKey(session)
	if x.p != nil {
		x.p.ForgetKey(session)
	}
}

// Sessions is the number of sessions the dispatcher holds state for.
func (x *Dispatcher) Sessions() int { return x.sessions.Len() }
