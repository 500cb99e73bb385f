package sim

import "github.com/pdhybrid/pdhybrid/internal/radix"

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
// Unless the chain is frozen. A turn that arrives while another of its
// session is still in flight (an overloaded cluster's queues) would make a
// diverging successor start a new array anyway, so its array is frozen:
// never written again, its views are keys the caches keep without a copy
// (engine.Request.SharedBlocks, kvc.Request.SharedBlocks). On an overloaded
// KVC run those copies were half of the allocation: sessions move between
// decoders, so every tree copied most of every prompt. A session whose turns
// never overlap keeps rewriting in place and its caches copy only the new
// blocks, which is cheaper there (freezing every chain cost the 1M-request
// naive-PD run a quarter more time).
//
// A session with no request in flight keeps its chain for its next turn,
// but idle chains are bounded in total (idleChainBudget ids of array
// capacity, least recently idle dropped first) so that memory follows the
// live sessions, not every session the trace ever named. The budget counts
// capacity, not length: a one-turn session's 8-block chain sits in a
// 256-id array, and counting its 8 ids let a million such sessions keep
// 2 GB of arrays under a 64 MiB budget. (A dropped frozen chain lives on while a
// cache keys on it; caches are bounded by their pools, so that is bounded.)

const idleChainBudget = 8 << 20 // block ids (64 MiB)

// freezeChains is off only in the test that checks frozen chains change no
// result (TestFrozenChainsChangeNoResult).
var freezeChains = true

// adoptChain returns ids as a view into sess's chain, extending or
// replacing the chain as needed, and whether the view is of a frozen array.
// ids is the reader's buffer, reused for the next request, so the view never
// aliases it. last says the request is its session's last (SessionEnds): no
// turn will extend the chain, so a new array gets no room to grow (on the
// Mooncake trace two thirds of the sessions have one turn, and the room was
// 40 ids a request). Room never changes a result, only when a later turn
// copies.
func (s *Sim) adoptChain(sess *session, ids []uint64, last bool) ([]uint64, bool) {
	c := sess.chain
	k := radix.CommonPrefix(c, ids)
	inPlace := k == len(c) || (sess.readers == 0 && !sess.frozen)
	switch {
	case k == len(ids):
	case inPlace && cap(c) >= len(ids):
		// Extending (into room no view has covered: a chain is as long as
		// its array's longest view), or diverging with no request of the
		// session still reading its view and no cache keying on it
		// (typically at the previous prompt's partial last block, whose id
		// changes once it fills): write in place.
		sess.chain = append(c[:k], ids[k:]...)
	case inPlace && last:
		// Out of room, and no turn to come: no room.
		sess.chain, sess.frozen = append([]uint64(nil), ids...), false
	case inPlace:
		// As above, out of room: a new array with room for the turns to
		// come (contexts grow by a few percent a turn).
		sess.chain, sess.frozen = append(make([]uint64, 0, 2*len(ids)+16), ids...), false
	case sess.readers > 0:
		// Another turn of the session still reads the old array: this turn
		// gets its own, frozen below. Its successor will diverge at its
		// partial last block and copy again, so it gets no room to grow.
		sess.chain = append([]uint64(nil), ids...)
	case last:
		// Caches key on the old array and no turn is to come: a new,
		// unfrozen array as below, with no room.
		sess.chain, sess.frozen = append([]uint64(nil), ids...), false
	default:
		// Caches key on the old array: as above, but the new one will not
		// be frozen, so it gets room for the turns to come. An append onto
		// a make clears only the room, not the copied ids.
		sess.chain, sess.frozen = append(ids[:len(ids):len(ids)], make([]uint64, len(ids)/8+16)...)[:len(ids)], false
	}
	if sess.readers > 0 && freezeChains {
		sess.frozen = true // overlapping turns: see above
	}
	return sess.chain[:len(ids)], sess.frozen
}

// sessionIdle files a session whose last request in flight ended; chains of
// the longest-idle sessions are dropped beyond the budget.
func (s *Sim) sessionIdle(sess *session) {
	sess.idleGen++
	sess.idleCounted = true
	s.idle = append(s.idle, idleRef{sess: sess, gen: sess.idleGen})
	s.idleIDs += cap(sess.chain)
	s.noteIdleForForget(sess)
	for s.idleHead < len(s.idle) && (s.idleIDs > idleChainBudget || s.idle[s.idleHead].stale()) {
		ref := s.idle[s.idleHead]
		s.idle[s.idleHead] = idleRef{}
		s.idleHead++
		if ref.sess.idleGen == ref.gen && ref.sess.idleCounted {
			s.idleIDs -= cap(ref.sess.chain)
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
		s.idleIDs -= cap(sess.chain)
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

// stale: the session has been busy (or forgotten) since it was filed, so
// the entry only keeps it alive; the list drops such entries from its head.
func (r idleRef) stale() bool { return r.sess.idleGen != r.gen || !r.sess.idleCounted }
