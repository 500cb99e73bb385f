package engine

import (
	"fmt"
	"testing"
)

// A decoder that pins its sessions frees their KV by trims, never by the
// LRU walk that moves the tail order's head, so the order must shed the
// tails the trims dropped by itself: after 4,000 one-turn sessions through
// a pool of a few, it holds at most twice the live tails plus 1,024 (it
// held all 4,000 before compactTailOrder), every tail it holds is live or
// is in the part the walks have not passed, and every live tail is in it
// in finish order.
func TestTailOrderShedsDroppedTails(t *testing.T) {
	w := sessionWorker(t, EvictSession, 8*6400)
	now := 0.0
	for i := range 4000 {
		now = seedOn(t, w, now, fmt.Sprint("s", i), chain(uint64(i+1), 100), 6400, 10)
		if n := len(w.tailOrder) - w.tailHead; n > 2*w.tails.Len()+1024 {
			t.Fatalf("after session %d the order holds %d tails for %d live", i, n, w.tails.Len())
		}
	}
	live, last := 0, -1.0
	for _, tl := range w.tailOrder[w.tailHead:] {
		if !tl.live {
			continue
		}
		if tl.at < last {
			t.Fatalf("tail of %s at %g after one at %g: out of finish order", tl.session.ID, tl.at, last)
		}
		last = tl.at
		live++
	}
	if live != w.tails.Len() || live == 0 {
		t.Fatalf("order holds %d live tails, the worker %d", live, w.tails.Len())
	}
	if len(w.tailOrder) > 2*1024+2*w.tails.Len() {
		t.Fatalf("order's slice holds %d entries", len(w.tailOrder))
	}
}
