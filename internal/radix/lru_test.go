package radix

import (
	"math/rand/v2"
	"testing"
)

// The LRU heap hands entries out in (access, seq) order, after pushes,
// pops and a re-heapify (compactLRU's init) in any interleaving, for heaps
// of a few levels and of many, and with pushes mostly in time order (as
// releases come) as well as at random.
func TestLRUHeapOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 240; trial++ {
		var h lruHeap
		var seq uint64
		ops, spread := 200, 8
		if trial >= 200 {
			ops = 5000
		}
		if trial%2 == 1 {
			spread = 1 << 30
		}
		for op := 0; op < ops; op++ {
			switch k := rng.IntN(10); {
			case k < 6 || len(h) == 0:
				seq++
				a := float64(rng.IntN(8))
				if spread > 8 {
					a = float64(seq) + float64(rng.IntN(3)) // mostly rising
				}
				h.push(lruEntry{access: a, seq: seq})
			case k < 9:
				want := 0
				for i := range h {
					if h[i].before(&h[want]) {
						want = i
					}
				}
				w := h[want]
				if e := h.pop(); e != w {
					t.Fatalf("trial %d: popped (%g, %d), the least was (%g, %d)", trial, e.access, e.seq, w.access, w.seq)
				}
			case ops < 1000:
				rng.Shuffle(len(h), func(i, j int) { h[i], h[j] = h[j], h[i] })
				h.init()
			}
		}
		var last *lruEntry
		for len(h) > 0 {
			e := h.pop()
			if last != nil && e.before(last) {
				t.Fatalf("trial %d: popped (%g, %d) after (%g, %d)", trial, e.access, e.seq, last.access, last.seq)
			}
			last = &e
		}
	}
}

// A leaf locked and released again is evicted by its latest release, not
// an earlier one: the heap entry of the earlier release must stay stale.
func TestRelockedLeafKeepsNewAccess(t *testing.T) {
	r := New(16)
	a := put(r, seq(1, 2), 16, 0)
	put(r, seq(10, 3), 16, 1)
	r.Relock(a, 2)
	r.Unlock(a, 3)
	if freed := r.Evict(1); freed != 48 {
		t.Fatalf("evicted %d tokens first, want the leaf last used at 1 (48)", freed)
	}
	if got := r.Match(seq(1, 2), 16); got.Blocks != 2 {
		t.Fatalf("leaf last used at 3 lost blocks: %+v", got)
	}
}

// The eviction heap's size follows the tree's, not the number of releases
// (compactLRU): past 1,024 entries it holds at most 4 per live node, and
// dropping stale entries keeps every live leaf in LRU order. First 300
// leaves released round robin, then all but 3 evicted and two of those
// released round robin again.
func TestLRUHeapStaysBounded(t *testing.T) {
	r := New(16)
	var leaves []int32
	for i := 0; i < 300; i++ {
		leaves = append(leaves, put(r, seq(1000*(i+1), 1), 16, float64(i)))
	}
	now := 300.0
	bounded := func(phase string) {
		t.Helper()
		live := len(r.nodes) - len(r.free)
		if len(r.lru) > 1024 && len(r.lru) > 4*live {
			t.Fatalf("%s: heap holds %d entries for %d live nodes", phase, len(r.lru), live)
		}
	}
	for i := 0; i < 1500; i++ {
		n := leaves[i%len(leaves)]
		r.Relock(n, now)
		r.Unlock(n, now)
		now++
		bounded("300 leaves")
	}
	// Leaf j was last released at i = 1200+j: the 297 least recently
	// released go, the last 3 stay.
	if freed := r.Evict(297 * 16); freed != 297*16 {
		t.Fatalf("evicted %d tokens, want 297 leaves", freed)
	}
	// keep[0] stays released while the other two cycle: the compactions
	// their releases trigger must keep its one entry.
	keep := leaves[297:]
	for i := 0; i < 3000; i++ {
		n := keep[1+i%2]
		r.Relock(n, now)
		r.Unlock(n, now)
		now++
		bounded("3 leaves")
	}
	// Last releases: keep[1] at i=2998, keep[2] at 2999, then keep[1].
	r.Relock(keep[1], now)
	r.Unlock(keep[1], now)
	for _, want := range []int32{keep[0], keep[2], keep[1]} {
		if n, ok := r.OldestLeaf(); !ok || n != want {
			t.Fatalf("oldest leaf %d (ok %v), want %d", n, ok, want)
		}
		if freed := r.Evict(1); freed != 16 {
			t.Fatalf("evicted %d, want one 16-token leaf", freed)
		}
	}
	checkRadix(t, r)
}
