package radix

import (
	"math/rand/v2"
	"testing"
)

// The LRU heap hands entries out in (access, seq) order, after pushes,
// pops and a re-heapify (compactLRU's init) in any interleaving.
func TestLRUHeapOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := 0; trial < 200; trial++ {
		var h lruHeap
		var seq uint64
		for op := 0; op < 200; op++ {
			switch k := rng.IntN(10); {
			case k < 6 || len(h) == 0:
				seq++
				h.push(lruEntry{access: float64(rng.IntN(8)), seq: seq})
			case k < 9:
				h.pop()
			default:
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
