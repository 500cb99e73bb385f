package kvc

// The home reseed (DecodeIsolation.HomeReseed, off by default): a large
// append v4's stall budget holds off the session's own decoder is reseeded
// through P back to that decoder, instead of to the next one Algorithm 1
// names, when by the pin book (pinbook.go) every other decoder would have to
// push sessions out of its pool to take the session's KV whole. Through P to
// its own decoder the reseed replaces the session's copy there, so that pool
// needs room for the new tokens only; elsewhere the old copy stays until it
// is trimmed and the new one pushes others out, whose next turns are
// reseeds too (docs/kvc-v4.md, "Tried: trim-aware placement from the pin
// book").

// v4HomeReseed reseeds the request through P to decoder d, which holds its
// session and refused its append over τ_append, when HomeReseed is on and
// every other decoder would push a session out for it; it reports whether
// it did.
func (t *Dispatch) v4HomeReseed(d int) bool {
	x := t.x
	if x.cfg.Mechanism != MechKVC || !x.cfg.V3.Isolation.On() || !x.cfg.V3.Isolation.HomeReseed || x.p == nil {
		return false
	}
	s := x.session(t.r.key())
	if s.pin != d || !x.breakers[d].allows(t.now) {
		return false
	}
	need := t.r.Input + max(t.r.Output, 1)
	for e := range x.d.names {
		if e == d || x.d.Out(e) || t.r.avoids(e) {
			continue
		}
		if _, n := x.pushedOut(e, need, s); n == 0 {
			return false // e takes it without pushing anyone out
		}
	}
	p := t.prefillWorker()
	if p < 0 {
		return false
	}
	if t.paths() {
		t.note("v4 home reseed: every other decoder would push a session out for %d tokens: through %s back to %s", need, x.p.names[p], x.d.names[d])
	}
	t.decide(ActSeed, p, d, "pd-router-real-large-append-reseed")
	return true
}
