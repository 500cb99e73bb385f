package engine

import (
	"fmt"
	"math/rand"
	"testing"
)

// The trim order's queue and heap give entries back in the order one heap
// of the same entries does: random pushes, mostly at the current time (in
// order), some older (ties broken by a smaller id, repins at an old last
// use), pops, entries put back after a look, stale entries compacted away.
func TestTrimOrderIsOneHeap(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewSource(seed))
		var o trimOrder
		var ref trimHeap
		now := 0.0
		id := 0
		var all []*dSession
		for step := 0; step < 3000; step++ {
			switch op := rng.Intn(10); {
			case op < 5: // file a session
				if rng.Intn(3) == 0 {
					now += float64(rng.Intn(3))
				}
				at := now
				if rng.Intn(8) == 0 {
					at = now - float64(rng.Intn(5)) // an old last use
				}
				id++
				name := fmt.Sprintf("s%05d", id)
				if rng.Intn(4) == 0 {
					name = fmt.Sprintf("s%05dx%d", rng.Intn(id+1), id) // ties in time may go either way by id; ids stay unique
				}
				s := &dSession{id: name, pinned: true, trimStamp: 1}
				all = append(all, s)
				e := trimEntry{lastUse: at, s: s, stamp: 1}
				o.push(e)
				ref.push(e)
			case op < 8 && o.len() > 0: // pop some, compare, put some back
				k := 1 + rng.Intn(min(4, o.len()))
				var aside []trimEntry
				for range k {
					if top, want := o.top(), ref[0]; top.lastUse != want.lastUse || top.s != want.s {
						t.Fatalf("seed %d step %d: top (%v, %s), one heap says (%v, %s)", seed, step, top.lastUse, top.s.id, want.lastUse, want.s.id)
					}
					got, want := o.pop(), ref.pop()
					if got.lastUse != want.lastUse || got.s != want.s {
						t.Fatalf("seed %d step %d: popped (%v, %s), one heap says (%v, %s)", seed, step, got.lastUse, got.s.id, want.lastUse, want.s.id)
					}
					aside = append(aside, got)
				}
				if rng.Intn(2) == 0 {
					o.putBack(aside)
					for _, e := range aside {
						ref.push(e)
					}
				}
			case op == 8 && len(all) > 0: // some go stale, then compact both
				for range 1 + rng.Intn(4) {
					all[rng.Intn(len(all))].trimStamp = 2
				}
				o.compact()
				kept := ref[:0]
				for _, e := range ref {
					if e.live() {
						kept = append(kept, e)
					}
				}
				ref = kept
				ref.init()
			}
			if o.len() != len(ref) {
				t.Fatalf("seed %d step %d: %d entries, one heap holds %d", seed, step, o.len(), len(ref))
			}
		}
		for o.len() > 0 {
			got, want := o.pop(), ref.pop()
			if got.lastUse != want.lastUse || got.s != want.s {
				t.Fatalf("seed %d, draining: popped (%v, %s), one heap says (%v, %s)", seed, got.lastUse, got.s.id, want.lastUse, want.s.id)
			}
		}
	}
}

// Entries filed in order all go to the queue (no heap work), and the
// queue reuses its front rather than growing without bound.
func TestTrimOrderQueueStaysBounded(t *testing.T) {
	var o trimOrder
	for i := range 100000 {
		s := &dSession{id: fmt.Sprintf("s%06d", i), pinned: true}
		o.push(trimEntry{lastUse: float64(i), s: s})
		if o.len() > 8 {
			o.pop()
		}
	}
	if len(o.heap) != 0 {
		t.Fatalf("%d entries in the heap; every push was in order", len(o.heap))
	}
	if cap(o.run) > 64 {
		t.Fatalf("the queue's array grew to %d for at most 9 entries", cap(o.run))
	}
}
