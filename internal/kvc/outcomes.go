package kvc

import "github.com/pdhybrid/pdhybrid/internal/radix"

// The outcomes an executor feeds back (the workers took, refused or
// finished the decided action; a decoder evicted a session), and what the
// dispatcher exposes of a request once decided.

// Mode is the request's execution-mode label (DESIGN §5); Path the chain of
// reasons that led to it.
func (t *Dispatch) Mode() string   { return t.mode }
func (t *Dispatch) Path() []string { return t.path }

// Accepted tells the dispatcher the workers took the decided action: the
// routers' state moves (only accepted requests pin sessions or enter the
// cache belief).
func (t *Dispatch) Accepted() {
	if !t.expect("Accepted", t.stage == stDeciding && t.act.Kind.starts()) {
		return
	}
	if t.x.trace != nil {
		t.x.traced("Accepted %s p%d d%d %s", t.act.Kind, t.act.P, t.act.D, t.mode)
	}
	x := t.x
	t.accepted, t.stage = true, stAccepted
	t.v3Accepted()
	t.pinAccepted()
	if x.cfg.Mechanism.IsPeer() {
		x.bindSession(t)
		x.dActive[t.chosenD] += t.dBlk
		x.dPrefill[t.chosenD] += t.dPre
		if t.kind == ActPD {
			x.pActive[t.chosenP] += t.pTok
		}
	}
	switch t.kind {
	case ActWholeP:
		t.v3AcceptedWholeP()
	case ActColo, ActLocal:
		t.sendTo(x.d, t.chosenD)
	case ActPD:
		t.sendTo(x.p, t.chosenP)
		if x.cfg.Mechanism == MechKVC {
			x.d.dispatched(t.chosenD, t.r.key(), nil, false) // D keeps nothing of it
			if !t.homeHeld {                                 // HomeHolds: the home keeps the session's earlier turns
				x.d.UnpinKey(t.r.key(), t.chosenD)
				x.unpin(t.r.key())
			}
		} else {
			t.sendTo(x.d, t.chosenD)
		}
	case ActDirect, ActSeed:
		if t.kind == ActSeed {
			t.sendTo(x.p, t.chosenP)
			x.seeding[t.chosenD]++
			t.seeding = true
		}
		var h radix.Handle
		if x.keepsOnD(t.chosenD) {
			h = t.sendTo(x.d, t.chosenD)
		} else {
			x.d.dispatched(t.chosenD, t.r.key(), nil, false) // pinned, but the decoder keeps nothing of it
		}
		s := x.session(t.r.key())
		if s.pin != t.chosenD {
			x.unpin(t.r.key())
			x.onD[t.chosenD]++
		}
		// What d will hold is known once the request ends (router gate:
		// until then a next turn there is no-direct-info).
		s.pin, s.last, s.resident, s.pending, s.evicted, s.onHost, s.hostTok = t.chosenD, t.chosenD, 0, t.r.Input+t.r.Output, false, false, 0
		s.onStore, s.storeTok = false, 0
		s.inflight++
		t.holds = true
		if len(s.handles) < len(x.d.names) {
			s.handles = append(s.handles, make([]radix.Handle, len(x.d.names)-len(s.handles))...)
		}
		s.handles[t.chosenD] = h
	}
	if s := x.session(t.r.key()); !s.seen {
		s.seen, t.firstSeen = true, true
	}
	t.act = Action{Kind: ActDone, P: -1, D: -1}
}

// Refused tells the dispatcher the workers refused the decided action (a
// request larger than a pool, say): the request fails with the cause.
func (t *Dispatch) Refused(cause string) {
	if !t.expect("Refused", t.stage == stDeciding && t.act.Kind.starts()) {
		return
	}
	t.x.traced("Refused")
	t.freeProbe()
	if t.paths() {
		t.note("refused: %s", cause)
	}
	t.act = Action{Kind: ActFail, P: -1, D: -1, Cause: cause}
}

// PrefillDone tells the dispatcher the request's prefill is over: its KV
// landed on its decoder (PD, seed), or its first token came (prefilled
// where it decodes: a direct append, colocated, whole on P). Both executors
// call it once, at that point (docs/lifecycle.md); Finished implies it.
func (t *Dispatch) PrefillDone() {
	if !t.expect("PrefillDone", t.stage == stAccepted) {
		return
	}
	t.x.traced("PrefillDone")
	t.stage = stDecoding
	t.prefillDone()
}

func (t *Dispatch) prefillDone() {
	t.v3PrefillDone()
	if t.accepted && t.dPre > 0 {
		t.x.dPrefill[t.chosenD] -= t.dPre
		t.dPre = 0
	}
	if t.seeding {
		t.x.seeding[t.chosenD]--
		t.seeding = false
	}
	if t.accepted && t.chosenP >= 0 {
		t.x.p.Done(t.chosenP)
		if t.x.cfg.Mechanism.IsPeer() {
			t.x.pActive[t.chosenP] -= t.pTok
		}
		t.chosenP = -1
	}
}

// Finished tells the dispatcher the request ended (ok: completed). Reject
// counts reset per the configured rule.
func (t *Dispatch) Finished(ok bool) {
	if !t.expect("Finished", t.stage != stEnded) {
		return
	}
	if t.x.trace != nil { // the arguments are boxed before traced looks
		t.x.traced("Finished %s", verdict(ok, "ok", "failed"))
	}
	x := t.x
	began := t.stage == stDecoding
	t.stage = stEnded
	x.open--
	t.v3Answered()
	t.v3FinishedWholeP()
	t.prefillDone()
	t.pinFinished(ok, began)
	t.freeProbe()
	if t.firstSeen && !ok {
		// The session's first accepted request failed: nothing of it was
		// kept anywhere, so a retry (the gateway's) is its first turn
		// again, labelled and placed as one.
		if s := x.sess(t.r.key()); s != nil {
			others := s.inflight
			if t.holds {
				others-- // this one, still counted
			}
			if others == 0 {
				s.seen = false
			}
		}
	}
	if !t.accepted || t.chosenD < 0 {
		return // not started, or served whole on a prefill worker (v3)
	}
	if t.holds {
		t.holds = false
		if s := x.sess(t.r.key()); s != nil {
			s.inflight--
			if ok && s.inflight == 0 && s.pin == t.chosenD {
				s.resident = s.pending
			}
		}
	}
	x.d.Done(t.chosenD)
	if x.cfg.Mechanism.IsPeer() {
		x.dActive[t.chosenD] -= t.dBlk
		t.dBlk = 0
		if s := x.sess(t.r.key()); !ok && s != nil && s.bound && s.boundD == t.chosenD {
			s.bound = false // Dynamo: a failure invalidates the binding
		}
	}
	if !ok || x.cfg.Mechanism != MechKVC {
		return
	}
	switch {
	case x.cfg.Reset == ResetDirect && t.kind == ActDirect,
		x.cfg.Reset == ResetAny && (t.kind == ActDirect || t.kind == ActSeed):
		if s := x.sess(t.r.key()); s != nil {
			s.forgive(t.chosenD)
		}
	}
}

// freeProbe frees the half-open slot of a probe that ended with no
// transport outcome (refused, or cut short before its transfer landed or
// failed).
func (t *Dispatch) freeProbe() {
	if t.probe {
		t.x.breakers[t.chosenD].probing = false
		t.probe = false
	}
}

// sendTo records the request as dispatched to worker w of router r, its
// blocks shared with the router's belief when the request allows it.
func (t *Dispatch) sendTo(r *Router, w int) radix.Handle {
	return r.dispatched(w, t.r.key(), t.r.Blocks, t.r.SharedBlocks)
}

// LastDecoder is the decoder that held the request's session before this
// request (−1 when none): where a passive D→P snapshot comes from.
func (t *Dispatch) LastDecoder() int { return t.lastD }

// Decoder and Prefill are the chosen workers (−1 when none).
func (t *Dispatch) Decoder() int { return t.chosenD }
func (t *Dispatch) Prefill() int { return t.chosenP }

// SessionEvicted is a decoder's report that it evicted a session. With the
// tracking belief the router forgets it was there; never-shrink keeps
// believing (the seed, F9).
func (x *Dispatcher) SessionEvicted(d int, session string) {
	x.SessionEvictedKey(d, SessionKey{ID: session})
}

// SessionEvictedKey is SessionEvicted of a session the caller numbers.
func (x *Dispatcher) SessionEvictedKey(d int, session SessionKey) {
	if x.trace != nil { // the arguments are boxed before traced looks
		x.traced("SessionEvicted d%d %s", d, session.ID)
	}
	x.pinFreed(d, x.sess(session)) // the pin book follows every report, whatever the belief
	if x.cfg.Belief != BeliefTrack {
		return
	}
	s := x.sess(session)
	if s == nil {
		return
	}
	// Forget what d held of it even if the session has moved on: a decoder
	// it left keeps its copy until it evicts it, and says so then.
	if d < len(s.handles) {
		x.d.ForgetBlocks(d, s.handles[d])
		s.handles[d] = radix.Handle{}
	}
	if s.pin == d {
		x.d.UnpinKey(session, d)
		x.unpin(session)
	}
	if s.last == d {
		s.evicted = true
	}
	x.reap(s) // a closed session the eviction left uncounted (close.go)
}

// PrefillBackups is a prefill worker's report of the sessions whose
// capacity-backup it keeps now (engine/backup.go): labels of reseeds after
// an eviction say whether P held the session (-after-prefill-backed-eviction).
func (x *Dispatcher) PrefillBackups(p int, sessions []SessionKey) {
	if x.backups == nil {
		x.backups = map[int][]SessionKey{}
	}
	for _, id := range x.backups[p] {
		if s := x.sess(id); s != nil && s.backup == p {
			s.backup = -1
		}
	}
	x.backups[p] = append(x.backups[p][:0], sessions...)
	for _, id := range sessions {
		x.session(id).backup = p
	}
}

func (x *Dispatcher) unpin(session SessionKey) {
	s := x.session(session)
	if s.pin >= 0 {
		x.onD[s.pin]--
		s.pin, s.resident, s.pending = -1, 0, 0
	}
}

func (x *Dispatcher) session(id SessionKey) *sessState {
	s := x.sess(id)
	if s == nil {
		s = &sessState{pin: -1, last: -1, backup: -1, key: id}
		x.sessions.Put(id, s)
	}
	return s
}

// sess is the session's record, nil for none.
func (x *Dispatcher) sess(id SessionKey) *sessState {
	s, _ := x.sessions.Get(id)
	return s
}

// Rejects is the (session, decoder) reject count (tests, logs).
func (x *Dispatcher) Rejects(session string, d int) int {
	if s := x.sess(SessionKey{ID: session}); s != nil {
		return s.rejected(d)
	}
	return 0
}
