package radix

import (
	"math/rand/v2"
	"testing"
)

// MatchSkip is Match: for prompts that share a prefix with another whose
// match was just taken, skipping min(shared, its Blocks) blocks gives the
// same Match (node, blocks, tokens, depth), over random trees of prompts
// with shared prefixes and partial last blocks, grown, split, evicted and
// nibbled; and the skip saves compares (Work).
func TestMatchSkipIsMatch(t *testing.T) {
	var saved, cases int
	for seed := uint64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 9))
		const bs = 8
		r := New(bs)
		// Prompts of a few families: a family's prompts share a prefix of
		// random length and then go their own ways, some diverging inside
		// what the tree holds as one edge.
		prompt := func() ([]uint64, int64) {
			fam := uint64(rng.IntN(3))
			n := 1 + rng.IntN(40)
			b := make([]uint64, n)
			shared := rng.IntN(n + 1)
			branch := uint64(1 + rng.IntN(4))
			for i := range b {
				if i < shared {
					b[i] = fam<<32 | uint64(i)
				} else {
					b[i] = fam<<32 | branch<<16 | uint64(i)
				}
			}
			return b, int64(1 + rng.IntN(bs))
		}
		for step := 0; step < 200; step++ {
			now := float64(step)
			switch op := rng.IntN(10); {
			case op < 5:
				b, last := prompt()
				put(r, b, last, now)
			case op < 6:
				r.Evict(int64(rng.IntN(60)))
			case op < 7:
				r.Nibble(int64(rng.IntN(30)))
			default:
				a, lastA := prompt()
				b, lastB := prompt()
				shared := CommonPrefix(a, b)
				ma := r.Match(a, lastA)
				want := r.Match(b, lastB)
				w0 := r.Work()
				r.Match(b, lastB)
				full := r.Work() - w0
				skip := min(shared, ma.Blocks)
				w0 = r.Work()
				got := r.MatchSkip(b, lastB, skip)
				if got != want {
					t.Fatalf("seed %d step %d: MatchSkip(skip %d: shared %d, other's match %+v) = %+v, Match = %+v", seed, step, skip, shared, ma, got, want)
				}
				if part := r.Work() - w0; part > full {
					t.Fatalf("seed %d step %d: skipping %d blocks did %d work, matching %d", seed, step, skip, part, full)
				} else if part < full {
					saved++
				}
				cases++
			}
		}
		checkRadix(t, r)
	}
	if saved < cases/10 {
		t.Fatalf("the skip saved work in %d of %d matches: the test does not reach it", saved, cases)
	}
}
