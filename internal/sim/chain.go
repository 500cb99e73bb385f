package sim

// Hash chains of consecutive turns share almost everything (≈99% for the
// Claude Code sessions), so the simulator stores a session's chain once and
// lets each turn's request refer to a prefix of it: a turn that extends the
// chain appends its new ids, one that repeats a prefix takes a view. A turn
// that diverges (at the previous prompt's partial last block, or at a
// compaction) rewrites the chain from there when no other request of the
// session still reads its view, and starts a new chain otherwise. A request
// reads its blocks from ingestion until its prefill is done (the engine and
// the routers copy what their caches keep; engine.Request.Blocks).
//
// A session with no request in flight keeps its chain for its next turn,
// but idle chains are bounded in total (idleChainBudget ids, least recently
// idle dropped first) so that memory follows the live sessions, not every
// session the trace ever named.

const idleChainBudget = 8 << 20 // block ids (64 MiB)

// adoptChain returns ids as a view into sess's chain, extending or
// replacing the chain as needed. ids is the reader's buffer, reused for the
// next request, so the view never aliases it.
func (s *Sim) adoptChain(sess *session, ids []uint64) []uint64 {
	c := sess.chain
	k := commonLen(c, ids)
	switch {
	case k == len(ids):
		return c[:k]
	case (k == len(c) || sess.readers == 0) && cap(c) >= len(ids):
		// Extending, or diverging with no request of the session still
		// reading its view (typically at the previous prompt's partial last
		// block, whose id changes once it fills): write in place.
		sess.chain = append(c[:k], ids[k:]...)
	case k == len(c) || sess.readers == 0:
		// As above, out of room: a new array with room for the turns to
		// come (contexts grow by a few percent a turn).
		sess.chain = append(make([]uint64, 0, max(2*len(ids), 256)), ids...)
	default:
		// Another turn of the session (queued behind its predecessor, or in
		// prefill) still reads the old array: this turn gets its own, which
		// later turns extend.
		sess.chain = append(make([]uint64, 0, len(ids)+len(ids)/8+16), ids...)
	}
	return sess.chain[:len(ids)]
}

func commonLen(a, b []uint64) int {
	n := min(len(a), len(b))
	k := 0
	for k < n && a[k] == b[k] {
		k++
	}
	return k
}

// sessionIdle files a session whose last request in flight ended; chains of
// the longest-idle sessions are dropped beyond the budget.
func (s *Sim) sessionIdle(sess *session) {
	sess.idleGen++
	sess.idleCounted = true
	s.idle = append(s.idle, idleRef{sess: sess, gen: sess.idleGen})
	s.idleIDs += len(sess.chain)
	for s.idleIDs > idleChainBudget && s.idleHead < len(s.idle) {
		ref := s.idle[s.idleHead]
		s.idle[s.idleHead] = idleRef{}
		s.idleHead++
		if ref.sess.idleGen == ref.gen && ref.sess.idleCounted {
			s.idleIDs -= len(ref.sess.chain)
			ref.sess.chain, ref.sess.idleCounted = nil, false
		}
	}
	if s.idleHead > 1024 && s.idleHead*2 > len(s.idle) {
		n := copy(s.idle, s.idle[s.idleHead:])
		clear(s.idle[n:])
		s.idle, s.idleHead = s.idle[:n], 0
	}
}

// sessionBusy takes a session off the idle list (lazily: its entry there
// goes stale).
func (s *Sim) sessionBusy(sess *session) {
	if sess.idleCounted {
		s.idleIDs -= len(sess.chain)
		sess.idleCounted = false
		sess.idleGen++
	}
}

// doneReading marks that r no longer reads its blocks.
func (s *Sim) doneReading(r *req) {
	if r.reading {
		r.reading = false
		r.sess.readers--
	}
}

type idleRef struct {
	sess *session
	gen  uint32
}
