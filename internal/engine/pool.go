package engine

// The KV pool's bookkeeping: what is free, making room for a request
// (cache eviction, then session trims, then backups), and granting the
// decode reservations queued for room.

import "fmt"

// freeRequest returns everything r holds to the pool.
func (w *Worker) freeRequest(now float64, r *Request) {
	w.own -= r.own
	r.own = 0
	w.reserved -= r.reservedOut
	r.reservedOut = 0
	if r.hostLocked {
		w.hiUnlock(now, r)
	}
	w.windowRelease(now, r) // its passes go before its lock
	w.swaRelease(r)
	if r.locked {
		w.tree.Unlock(r.node, now)
		r.locked = false
		w.demote(r)
	}
	if w.own < 0 || w.reserved < 0 {
		panic(fmt.Sprintf("engine %s: negative KV accounting (own %d, reserved %d)", w.cfg.Name, w.own, w.reserved))
	}
}

// free is the pool space neither used nor promised.
func (w *Worker) free() int64 { return w.capacity - w.Used() - w.reserved }

// makeRoomFor makes room for a request of session except: evictable cache
// first, in one LRU order; then a session-aware decoder trims sessions
// other than except (the scheduler's own trim: without it a request
// admitted by RPC could wait forever behind sessions nobody will ever trim).
// It reports whether need tokens are now free.
func (w *Worker) makeRoomFor(now float64, need int64, except string) bool {
	f := w.free()
	if f >= need {
		return true
	}
	if w.cfg.Session.Enabled {
		var rep AdmitReply
		for f := w.free() + w.evictable() + w.dumping; f < need && w.trimFor(now, except, need-f, &rep); f = w.free() + w.evictable() + w.dumping {
		}
	}
	// Backups are a best effort: a request the pool cannot otherwise take
	// goes before them, oldest dropped first.
	for w.free()+w.evictable() < need && len(w.backups) > 0 {
		w.tree.Unlock(w.backups[0].node, now)
		w.backups = append(w.backups[:0], w.backups[1:]...)
	}
	if w.tree == nil || w.free()+w.evictable() < need {
		return false
	}
	// Radix leaves and output tails go in one least-recently-used order.
	for w.free() < need {
		tt, hasTail := w.oldestTail()
		lt, hasLeaf := w.tree.OldestAccess()
		switch {
		case hasTail && (!hasLeaf || tt < lt):
			w.stats.EvictedTokens += w.evictOldestTail()
		case hasLeaf && w.cfg.Session.Enabled && w.cfg.Session.Eviction == EvictBlock:
			w.hiDemoteOldest(now)
			w.stats.EvictedTokens += w.tree.NibbleOne(need - w.free())
		case hasLeaf:
			w.hiDemoteOldest(now)
			w.stats.EvictedTokens += w.tree.Evict(1)
		default:
			return false
		}
	}
	return true
}

// grantReservations admits queued DecodeOnly reservations in FIFO order.
func (w *Worker) grantReservations(now float64) {
	for w.prealloc.len() > 0 {
		r := w.prealloc.peek()
		if w.admitted >= w.cfg.MaxRunning {
			return
		}
		out := int64(max(r.Output, 1))
		if !w.swaFits(r) {
			w.countKVWait(r)
			return
		}
		unpinned := w.unpinFor(now, r)
		w.lockDecodePrefix(now, r)
		if !w.makeRoomFor(now, int64(r.Input-r.CachedTokens)+out, r.Session) {
			w.unlockDecodePrefix(now, r)
			w.repin(now, unpinned) // it waits: its session stays as it was
			w.countKVWait(r)
			return
		}
		w.prealloc.pop()
		w.admitted++
		r.own = int64(r.Input - r.CachedTokens)
		w.own += r.own
		r.reservedOut = out
		w.reserved += out
		w.stats.CachedTokens += int64(r.CachedTokens)
		r.Stage, r.AdmittedAt = StageReserved, now
		w.swaTake(now, r)
		w.transferring++
		w.events = append(w.events, Event{Kind: EvReserved, Req: r, Time: now})
	}
}

// countKVWait counts a request the first time the pool makes it wait.
func (w *Worker) countKVWait(r *Request) {
	if !r.kvWaited {
		r.kvWaited = true
		w.stats.KVWaits++
	}
}
