package sim

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// The scan's table keeps what a map from hash to latest ordinal keeps:
// random hashes from a small range (repeats, so updates, and hash 0), from
// the whole range, and hashes that all start probing at one slot of the
// first array, across several growths.
func TestLastTableIsAMap(t *testing.T) {
	same := sameSlotHashes(40)
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var tab lastTable
		want := map[uint64]int32{}
		n := 500 + rng.IntN(20000)
		for i := range n {
			var h uint64
			switch rng.IntN(4) {
			case 0:
				h = uint64(rng.IntN(300))
			case 1:
				h = same[rng.IntN(len(same))]
			default:
				h = rng.Uint64()
			}
			tab.put(h, int32(i))
			want[h] = int32(i)
		}
		var got, exp []int32
		tab.each(func(i int32) { got = append(got, i) })
		for _, i := range want {
			exp = append(exp, i)
		}
		slices.Sort(got)
		slices.Sort(exp)
		if !slices.Equal(got, exp) {
			t.Fatalf("seed %d: %d entries, want %d (first differing of %v / %v)", seed, len(got), len(exp), head(got), head(exp))
		}
		if tab.n+min(int(tab.zero), 1) != len(want) {
			t.Fatalf("seed %d: counts %d entries, want %d", seed, tab.n, len(want))
		}
	}
}

// sameSlotHashes finds n nonzero hashes whose first slot in a 1,024-slot
// table is the same, so that they probe past one another.
func sameSlotHashes(n int) []uint64 {
	var out []uint64
	for h := uint64(1); len(out) < n; h++ {
		if (h*lastMix)>>54 == 0 {
			out = append(out, h)
		}
	}
	return out
}

func head(s []int32) []int32 { return s[:min(len(s), 8)] }
