package kvc

import (
	"math/rand/v2"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/radix"
)

// The router's table of root edges (Router.roots) answers every overlap
// exactly as the index's own tree does: random dispatches of prompts that
// share first blocks, split each other's edges and overflow a small index
// (its evictions), forgotten paths, a worker reset and a worker added.
// The table also holds no first block an index has no edge for (a stale bit
// costs only a lookup, but the table would grow with every prompt ever
// sent). It fails without the tree's call on a new root edge or on a freed
// one, when a reset index keeps its old bits, or when the one-probe mask
// outlives a change of the table.
func TestRootTableMatchesIndexes(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		r := NewRouter([]string{"a", "b", "c"}, PolicyKVAware, Options{IndexBlocks: 40})
		if r.roots == nil {
			t.Fatal("no root table for 3 workers")
		}
		prompt := func() []uint64 {
			b := make([]uint64, 1+rng.IntN(12))
			b[0] = uint64(1 + rng.IntN(9)) // few first blocks: shared and split edges
			for i := 1; i < len(b); i++ {
				b[i] = uint64(rng.IntN(4))
				if rng.IntN(3) == 0 {
					b[i] = rng.Uint64()
				}
			}
			return b
		}
		var held [][2]any // (worker, handle)
		for step := 0; step < 3000; step++ {
			switch k := rng.IntN(20); {
			case k < 12:
				w := rng.IntN(len(r.names))
				h := r.dispatched(w, SessionKey{}, prompt(), false)
				held = append(held, [2]any{w, h})
			case k < 17 && len(held) > 0:
				j := rng.IntN(len(held))
				r.ForgetBlocks(held[j][0].(int), held[j][1].(radix.Handle))
				held = append(held[:j], held[j+1:]...)
			case k == 17 && step%200 == 0:
				r.Reset(rng.IntN(len(r.names)))
			case k == 18 && step == 1500:
				r.Add("d")
			}
			for first, m := range r.roots {
				for i := range r.index {
					if has := r.index[i].prefix([]uint64{first}) > 0; has != (m>>uint(i)&1 == 1) {
						t.Fatalf("seed %d step %d: table says index %d has an edge at %d: %v, its tree: %v", seed, step, i, first, !has, has)
					}
				}
			}
			for q := 0; q < 4; q++ {
				b := prompt()
				for i := range r.index {
					if got, want := r.overlap(nil, i, b), r.index[i].prefix(b); got != want {
						t.Fatalf("seed %d step %d: overlap with index %d = %d, its tree holds %d of %v", seed, step, i, got, want, b)
					}
				}
			}
		}
	}
}
