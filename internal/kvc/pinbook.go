package kvc

// The pin book: what the router believes each decoder holds pinned, per
// session, with its size. A session-aware decoder (engine/session.go) pins a
// session's KV when a request of it that keeps the session ends there, and
// only a trim frees it; a trim takes the least recently used session with no
// request of it on the decoder (the default trim policy, idle), and the
// decoder reports each one (SessionEvicted, or SessionDemoted and
// SessionStored when a lower tier keeps what HBM freed). So the router can
// follow each pool from what it already sees:
//
//   - a request that keeps its session on decoder d (a direct append, a
//     local seed, a seed or reseed through P) makes the session busy there
//     from Accepted (the decoder takes the request's KV under the request's
//     own lock, not the session's pin), and its footprint, prompt plus
//     output, is d's busy KV until it ends;
//   - Finished(ok) pins the session on d with the request's prompt plus
//     output (what the decoder's dSession.tokens records), most recently
//     used; a plain-PD request on d holds its footprint while it runs and
//     pins nothing;
//   - d's eviction report unpins it there, wherever the session's pin has
//     moved since: a decoder a session left keeps its copy until it trims
//     it, and that copy is what pushes other sessions out.
//
// Exact, in the simulator with session-granular trims of idle sessions and
// every report delivered: the pinned sessions with no request of theirs on
// d, their count and the sum of their sizes, are the decoder's own
// (TestPinBookMatchesTheEngine), and the order of the idle list is the
// order of their last requests' ends, the decoder's LRU order. Estimated,
// and said so where it is used:
//   - sizes are per session: blocks two sessions share (a system prompt)
//     count in both, so the pinned sum can exceed the pool's pinned KV and
//     the room left is under-estimated;
//   - a request that failed after its prefill began left its session
//     unpinned on the decoder without a report (the decoder unpinned it on
//     admission): the book drops the hold then, and keeps it when the
//     request failed earlier, still waiting;
//   - tail trims (--eviction tail) and block-granular eviction free parts
//     of sessions without a report: under them the book over-counts;
//   - with a host tier the decoder may prefer a victim its host already
//     holds within a small window (engine TrimHostWindow), not strictly the
//     least recently used.

// pinHold is one session's KV on one decoder, as the book believes it.
type pinHold struct {
	s          *sessState
	d          int
	tokens     int  // prompt + output of the last request of it that ended here
	busy       int  // its requests in flight here that keep the session
	pinned     bool // it ended here and no eviction was reported since
	forgotten  bool // its session's record was dropped (ForgetSession): never pinned again
	lost       bool // reported freed while busy: the requests in flight pin nothing (pinFreed)
	prev, next *pinHold
}

// idle reports whether h is on its decoder's idle list: pinned, with no
// request of it there (what an idle trim may evict).
func (h *pinHold) idle() bool { return h.pinned && h.busy == 0 }

// stale reports whether h's copy is one its session left: the session is
// pinned on another decoder or hosted whole on a prefill worker since, so
// its next turn goes there and the copy here serves nothing. (A session
// pinned nowhere may still find this copy through the router's index.)
func (h *pinHold) stale() bool {
	return h.s.pin >= 0 && h.s.pin != h.d || h.s.onP > 0
}

// pinList is one decoder's idle pinned sessions, least recently used first.
type pinList struct {
	head, tail *pinHold
	n, tokens  int
}

func (l *pinList) push(h *pinHold) {
	h.prev, h.next = l.tail, nil
	if l.tail != nil {
		l.tail.next = h
	} else {
		l.head = h
	}
	l.tail = h
	l.n++
	l.tokens += h.tokens
}

func (l *pinList) remove(h *pinHold) {
	if h.prev != nil {
		h.prev.next = h.next
	} else {
		l.head = h.next
	}
	if h.next != nil {
		h.next.prev = h.prev
	} else {
		l.tail = h.prev
	}
	h.prev, h.next = nil, nil
	l.n--
	l.tokens -= h.tokens
}

// pinBook is the book of every decoder.
type pinBook struct {
	idle    []pinList // per decoder
	busyTok []int     // per decoder: footprints of the requests in flight there
	pinned  []int     // per decoder: sessions pinned there, idle or busy
}

func (b *pinBook) grow(n int) {
	if len(b.idle) < n {
		b.idle = append(b.idle, make([]pinList, n-len(b.idle))...)
		b.busyTok = append(b.busyTok, make([]int, n-len(b.busyTok))...)
		b.pinned = append(b.pinned, make([]int, n-len(b.pinned))...)
	}
}

// hold is s's hold on decoder d, made on first use.
func (x *Dispatcher) hold(s *sessState, d int) *pinHold {
	if len(s.holds) <= d {
		s.holds = append(s.holds, make([]*pinHold, d+1-len(s.holds))...)
	}
	if s.holds[d] == nil {
		s.holds[d] = &pinHold{s: s, d: d}
	}
	return s.holds[d]
}

// pinFootprint is a request's KV on its decoder: its prompt and its output
// (a decoder generates at least one token).
func (t *Dispatch) pinFootprint() int { return t.r.Input + max(t.r.Output, 1) }

// KeepPinBook keeps the pin book when nothing reads it: for tests that
// check it against the engine. Call it before the first request.
func (x *Dispatcher) KeepPinBook() { x.pinsOn = true }

// pinAccepted books an accepted request's KV on its decoder. Only it opens
// a session's holds, so with the book off the other entries find nothing.
func (t *Dispatch) pinAccepted() {
	x := t.x
	if !x.pinsOn || x.cfg.Mechanism != MechKVC || t.chosenD < 0 {
		return
	}
	switch t.kind {
	case ActDirect, ActSeed, ActPD:
	default:
		return
	}
	x.pins.grow(len(x.d.names))
	t.pinFoot = t.pinFootprint()
	x.pins.busyTok[t.chosenD] += t.pinFoot
	if t.kind == ActPD || !x.keepsOnD(t.chosenD) {
		return // the decoder keeps nothing of it
	}
	h := x.hold(x.session(t.r.key()), t.chosenD)
	if h.idle() {
		x.pins.idle[h.d].remove(h)
	}
	h.busy++
	t.pinH = h
}

// pinFinished moves an ended request's KV in the book: its footprint leaves
// its decoder's busy KV, and its session, if it kept it there, is pinned
// (ok) or, failed after its prefill began, lost (the book's estimate).
func (t *Dispatch) pinFinished(ok bool, began bool) {
	x := t.x
	if t.pinFoot == 0 {
		return
	}
	x.pins.busyTok[t.chosenD] -= t.pinFoot
	t.pinFoot = 0
	h := t.pinH
	if h == nil {
		return
	}
	t.pinH = nil
	h.busy--
	switch {
	case h.forgotten, h.lost:
		h.lost = h.lost && h.busy > 0
	case ok:
		if !h.pinned {
			h.pinned = true
			x.pins.pinned[h.d]++
		}
		h.tokens = t.pinFootprint()
	case began && h.pinned:
		h.pinned = false
		x.pins.pinned[h.d]--
	}
	if h.idle() {
		x.pins.idle[h.d].push(h)
	}
}

// pinFreed is decoder d's report that it freed session s's KV from HBM.
// A report about a session with a request of it in flight there means,
// under idle trims, that the request has ended on the decoder and its KV
// was pinned and trimmed before the ending reached the router (the
// simulator delivers reports as the decoder makes them, endings after): the
// ending then pins nothing. Under --trim any a running session's pin may be
// dropped while it runs, and the decoder pins it again at its end; the book
// then believes it gone, as the router's residency belief does.
func (x *Dispatcher) pinFreed(d int, s *sessState) {
	if s == nil || d >= len(s.holds) || s.holds[d] == nil {
		return
	}
	h := s.holds[d]
	if h.busy > 0 {
		h.lost = true
	}
	x.unhold(h)
}

// unhold takes h's KV out of its decoder's book.
func (x *Dispatcher) unhold(h *pinHold) {
	if !h.pinned {
		return
	}
	if h.idle() {
		x.pins.idle[h.d].remove(h)
	}
	h.pinned = false
	x.pins.pinned[h.d]--
}

// pinForget drops what the book holds of a session whose record goes
// (ForgetSession), on decoder d only when d ≥ 0 (ForgetDecoder): the
// router no longer believes it there, so it no longer counts it.
func (x *Dispatcher) pinForget(s *sessState, d int) {
	for i, h := range s.holds {
		if h != nil && (d < 0 || i == d) {
			x.unhold(h)
			h.forgotten = true
			s.holds[i] = nil
		}
	}
}

// pinHeld reports whether the book still counts s on some decoder (a
// closed session's record is kept until it does not: close.go).
func (s *sessState) pinHeld() bool {
	for _, h := range s.holds {
		if h != nil && (h.pinned || h.busy > 0) {
			return true
		}
	}
	return false
}

// PinnedIdle is the book's belief of decoder d: the sessions pinned there
// with no request of theirs in flight (what a trim may evict) and the sum
// of their sizes in tokens (tests, logs).
func (x *Dispatcher) PinnedIdle(d int) (sessions, tokens int) {
	if d >= len(x.pins.idle) {
		return 0, 0
	}
	return x.pins.idle[d].n, x.pins.idle[d].tokens
}

// PinBookOK checks the book's invariants: no count or sum negative, each
// idle list's count and sum those of its holds, every hold on it idle, and
// the pinned count at least the idle one (tests).
func (x *Dispatcher) PinBookOK() bool {
	for d := range x.pins.idle {
		l := &x.pins.idle[d]
		n, tok := 0, 0
		for h := l.head; h != nil; h = h.next {
			if !h.idle() || h.d != d || h.tokens < 0 {
				return false
			}
			n++
			tok += h.tokens
		}
		if n != l.n || tok != l.tokens || x.pins.busyTok[d] < 0 || x.pins.pinned[d] < l.n {
			return false
		}
	}
	return true
}

// pushedOut is what placing need more tokens of KV on decoder d would push
// out of its pool, by the book: the room left is d's pool less its idle
// pinned sessions and the requests in flight there, and the least recently
// used idle sessions other than the request's own go, oldest first, until
// the room holds need. It returns the sizes of the sessions that go, in
// tokens (the reseeds their next turns would need), and how many; a copy
// its session left (stale) makes room and is in neither: it costs nothing. Pool 0 pushes
// nothing (the router's index always has a bound, its default 2^20
// blocks, so it is never 0 in practice).
func (x *Dispatcher) pushedOut(d, need int, self *sessState) (tokens, n int) {
	pool := x.poolTokens()
	if pool <= 0 || d >= len(x.pins.idle) {
		return 0, 0
	}
	l := &x.pins.idle[d]
	room := pool - l.tokens - x.pins.busyTok[d]
	for h := l.head; h != nil && room < need; h = h.next {
		if h.s == self {
			continue
		}
		room += h.tokens
		if h.stale() {
			continue // its session's live copy is elsewhere: nothing to reseed
		}
		tokens += h.tokens
		n++
	}
	return tokens, n
}

// poolTokens is a decoder's KV pool in tokens, as the router's index is
// bounded to it (Options.IndexBlocks; 0 when not known).
func (x *Dispatcher) poolTokens() int {
	return x.d.opts.IndexBlocks * max(x.cfg.BlockSize, 1)
}
