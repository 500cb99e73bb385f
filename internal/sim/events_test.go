package sim

import (
	"math/rand/v2"
	"testing"
)

// The event queue hands events out in (time, sequence) order whatever the
// interleaving of pushes and pops.
func TestEventHeapOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 200; trial++ {
		var h eventHeap
		var seq uint64
		last := event{t: -1}
		for op := 0; op < 300; op++ {
			if len(h) == 0 || rng.IntN(3) > 0 {
				seq++
				// Times never before the last popped, as in the simulator;
				// few distinct values, so ties are common.
				h.push(event{t: last.t + 1 + float64(rng.IntN(4)), seq: seq})
				continue
			}
			e := h.pop()
			if e.t < last.t || e.t == last.t && e.seq < last.seq {
				t.Fatalf("trial %d: popped (%g, %d) after (%g, %d)", trial, e.t, e.seq, last.t, last.seq)
			}
			last = e
		}
		for len(h) > 0 {
			e := h.pop()
			if e.t < last.t || e.t == last.t && e.seq < last.seq {
				t.Fatalf("trial %d, draining: popped (%g, %d) after (%g, %d)", trial, e.t, e.seq, last.t, last.seq)
			}
			last = e
		}
	}
}
