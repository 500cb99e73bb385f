package kvc

// Prefill workers that serve requests whole (V3Config.WholeOnP) and host
// sessions (PHosts): a PD cluster that decodes on every GPU, as a
// data-parallel one does. The bookkeeping of what each prefill worker
// serves whole and hosts is v3Load's (v3.go).

// v3AcceptedWholeP moves the routers' state for a request served whole on
// a prefill worker: P's cache holds it now, no decoder holds the session.
func (t *Dispatch) v3AcceptedWholeP() {
	x := t.x
	t.sendTo(x.p, t.chosenP)
	s := x.session(t.r.key())
	if s.pin >= 0 {
		x.d.UnpinKey(t.r.key(), s.pin)
		x.unpin(t.r.key())
	}
	x.setOnP(s, 1+t.chosenP)
	x.load.whole[t.chosenP]++
	t.wholeAt = 1 + t.chosenP
}

// setOnP moves session s to prefill worker onP−1 (0: to none), keeping
// the count of sessions each one hosts.
func (x *Dispatcher) setOnP(s *sessState, onP int) {
	if s.onP > 0 {
		x.load.hosted[s.onP-1]--
	}
	if s.onP = onP; onP > 0 {
		x.load.hosted[onP-1]++
	}
}

// v3FinishedWholeP ends a request served whole on a prefill worker.
func (t *Dispatch) v3FinishedWholeP() {
	if t.wholeAt > 0 {
		t.x.load.whole[t.wholeAt-1]--
		t.wholeAt = 0
	}
}

// v3HostOnP reports whether a new session starts whole on prefill worker
// p (PHosts): with BalanceStarts while p is within its share (v3ShareOnP);
// else when p serves fewer requests whole than every decoder in service
// has in flight, or p has no prefill queued and hosts fewer sessions than
// every decoder (so P takes its share of sessions that arrive while some
// decoder is idle).
func (t *Dispatch) v3HostOnP(p int) bool {
	x := t.x
	least, fewest := -1, -1
	for d := range x.d.names {
		if x.d.Out(d) {
			continue
		}
		if n := x.d.Inflight(d) + min(x.load.pend[d], 1); least < 0 || n < least {
			least = n
		}
		if fewest < 0 || x.onD[d] < fewest {
			fewest = x.onD[d]
		}
	}
	ok := least < 0 || x.load.whole[p] < least || (x.load.p[p] == 0 && x.load.hosted[p] < fewest)
	if x.cfg.V3.BalanceStarts {
		ok = x.v3ShareOnP(p) && t.v4Allows(true, p, t.pUncached(p), t.r.Input-t.pUncached(p))
		if t.paths() {
			t.note("v3: %s started %d of %d sessions with %d prefill tokens queued (at most %d): %s",
				x.p.names[p], x.load.started.p[p], x.load.started.all, x.load.p[p], x.cfg.V3.PHostQueueTokens, verdict(ok, "the session starts on P", "a decoder"))
		}
		return ok
	}
	if t.paths() {
		t.note("v3: %s serves %d requests whole and hosts %d sessions; the least busy decoder has %d in flight, the emptiest %d sessions: %s",
			x.p.names[p], x.load.whole[p], x.load.hosted[p], least, fewest, verdict(ok, "the session starts on P", "a decoder"))
	}
	return ok
}

// v3HostPick is the prefill worker that would host a new session: the one
// serving the fewest requests whole, then hosting the fewest sessions
// (P's router's pick on a tie); −1 when every one is out of service.
// A lone prefill worker in service is the pick with no walk of its index
// (pickWorker), a walk per new session whose overlap nobody read.
func (x *Dispatcher) v3HostPick(r Request) int {
	p := x.p.pickWorker(nil, r.key(), r.Blocks)
	for i := range x.p.names {
		if x.p.Out(i) {
			continue
		}
		if p < 0 || x.p.Out(p) || x.load.whole[i] < x.load.whole[p] ||
			x.load.whole[i] == x.load.whole[p] && x.load.hosted[i] < x.load.hosted[p] {
			p = i
		}
	}
	if p >= 0 && x.p.Out(p) {
		return -1
	}
	return p
}

// v3StayOnP serves a session's turn whole on a prefill worker: a new
// session's first when PHosts (v3HostOnP) or ColdOnP let it start there,
// and a later one on the worker that served its last turn whole, with no
// admission round trip, when that worker's queue with what it lacks of the
// prompt is no longer than the least-loaded decoder's would be with the
// whole prompt. It reports whether it did. P's prefix cache holds the
// session then, as a colocated worker's would.
func (t *Dispatch) v3StayOnP() bool {
	x := t.x
	s := x.session(t.r.key())
	if x.cfg.Mechanism != MechKVC || !x.cfg.V3.WholeOnP || x.p == nil || x.v3NoP() {
		return false
	}
	x.ensureLoad()
	p := s.onP - 1
	if s.onP == 0 {
		// A new session may start on P as on one more decoder; an old one
		// stays where it is.
		switch {
		case s.seen:
			return false
		case x.cfg.V3.PHosts:
			if p = x.v3HostPick(t.r); p < 0 || !x.wholeOnP(p) || !t.v3HostOnP(p) {
				return false
			}
			t.decide(ActWholeP, p, -1, ModeWholeOnP)
			return true
		case x.cfg.V3.ColdOnP:
			p = t.prefillWorker()
		default:
			return false
		}
	}
	if p < 0 || x.p.Out(p) || !x.wholeOnP(p) {
		return false
	}
	pq := t.v3StayQueue(p)
	dq := -1
	for d := range x.d.names {
		if q := x.load.d[d] + x.load.pend[d] + t.r.Input; !x.d.Out(d) && (dq < 0 || q < dq) {
			dq = q
		}
	}
	if dq >= 0 && pq > dq {
		return false
	}
	if t.paths() {
		t.note("v3: %s served the session's last turn whole; again (%d prefill tokens queued with this, a decoder %d)", x.p.names[p], pq, dq)
	}
	t.decide(ActWholeP, p, -1, ModeWholeOnP)
	return true
}

// v3WarmOnP serves whole on a prefill worker a request that falls back to
// plain PD for a reason other than space (every decoder blacklisted for
// the session, a large append over the stall budget) when that worker
// caches the prompt but for at most τ_append tokens: plain PD would
// prefill those few tokens there and then move the whole context's KV to a
// decoder that keeps none of it, turn after turn. It reports whether it
// did.
func (t *Dispatch) v3WarmOnP() bool {
	x := t.x
	if !x.cfg.V3.WholeOnP || x.v3NoP() {
		return false
	}
	p := t.prefillWorker()
	if p < 0 || x.p.Out(p) || !x.wholeOnP(p) {
		return false
	}
	unc := t.pUncached(p)
	if unc > x.cfg.TauAppend || !t.v4Allows(true, p, unc, t.r.Input-unc) {
		return false
	}
	if t.paths() {
		t.note("v3 fallback: %s caches all but %d tokens of the prompt: served whole there", x.p.names[p], unc)
	}
	t.decide(ActWholeP, p, -1, ModeWholeOnP)
	return true
}
