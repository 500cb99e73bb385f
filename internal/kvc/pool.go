package kvc

import "github.com/pdhybrid/pdhybrid/internal/radix"

// Pools that change at run time: the gateway's operator drains a worker
// (no new requests go to it, those in flight finish), adds one, or removes
// one. Indices never move — a worker's index is how every dispatch in flight,
// every session pin and every belief names it — so a removed worker stays in
// its slot, excluded, with what the router believed of it forgotten, and a
// worker added again under the same name takes its old slot back. The
// simulator never calls any of this; nothing here reads a clock.

// Add appends a worker to the router's pool and returns its index.
func (r *Router) Add(name string) int {
	// Copy on append: names may share its backing array with the caller's.
	r.names = append(r.names[:len(r.names):len(r.names)], name)
	r.inflight = append(r.inflight, 0)
	r.assigned = append(r.assigned, 0)
	if r.excluded != nil {
		r.excluded = append(r.excluded, false)
	}
	if r.down != nil {
		r.down = append(r.down, false)
	}
	if r.index != nil {
		r.index = append(r.index, newBlockIndex(r.opts, &r.indexVers))
		if len(r.index) > 64 {
			r.roots = nil // past the mask's bits: every overlap walks its tree
		}
		r.watchRoots(len(r.index) - 1)
	}
	return len(r.names) - 1
}

// SetExcluded keeps worker w out of (or lets it back into) every pick: a
// drained or removed worker. Its counters and pins stay; only new choices
// pass it over. With every worker excluded, picks return Worker −1.
func (r *Router) SetExcluded(w int, excluded bool) {
	if r.excluded == nil {
		r.excluded = make([]bool, len(r.names))
	}
	r.excluded[w] = excluded
	r.recount()
}

// Excluded reports whether worker w is kept out of picks.
func (r *Router) Excluded(w int) bool { return r.excluded != nil && r.excluded[w] }

// Reset forgets what the router believes worker w caches and every session
// pinned to it (the worker left the pool; it may come back empty).
func (r *Router) Reset(w int) {
	if r.index != nil {
		r.unwatchRoots(w)
		r.index[w] = newBlockIndex(r.opts, &r.indexVers)
		r.watchRoots(w)
	}
	r.pins.DeleteIf(func(p int) bool { return p == w })
}

// AddPrefill and AddDecoder grow the pools by one worker and return its
// index; a decoder (or colocated worker) gets a closed breaker. With
// MaxRetries −1 (one admission attempt per decoder) ε follows the pool.
func (x *Dispatcher) AddPrefill(name string) int {
	x.pActive = append(x.pActive, 0)
	return x.p.Add(name)
}

func (x *Dispatcher) AddDecoder(name string) int {
	d := x.d.Add(name)
	x.onD = append(x.onD, 0)
	x.breakers = append(x.breakers, breaker{cfg: x.cfg.Breaker})
	x.seeding = append(x.seeding, 0)
	x.dActive = append(x.dActive, 0)
	x.dPrefill = append(x.dPrefill, 0)
	if x.autoEps {
		x.cfg.MaxRetries = len(x.d.names) - 1
	}
	return d
}

// ForgetDecoder drops the control plane's belief about decoder d (it was
// removed): no session is believed pinned or resident there any more, so a
// session's next turn is admitted elsewhere and seeded there.
func (x *Dispatcher) ForgetDecoder(d int) {
	x.sessions.Each(func(s *sessState) {
		if s.pin == d {
			x.unpin(s.key)
		}
		if s.last == d {
			s.last = -1
		}
		if d < len(s.handles) {
			s.handles[d] = radix.Handle{}
		}
		x.pinForget(s, d)
	})
	x.d.Reset(d)
}

// noWorker fails the request: every worker of the pool it needs is drained
// or removed.
func (t *Dispatch) noWorker(pool string) {
	if t.paths() {
		t.note("no %s worker: every one is drained, removed or down", pool)
	}
	t.act = Action{Kind: ActFail, P: -1, D: -1, Cause: "no-" + pool + "-worker: every " + pool + " worker is drained, removed or failing its health checks"}
}
