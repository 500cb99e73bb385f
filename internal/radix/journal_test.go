package radix

import (
	"math/rand/v2"
	"testing"
)

// TestJournalNamesEveryMovedMatch is the journal's contract: a prompt whose
// two slots (MatchSlots) no change named still has the match it had. Random
// prompts sharing prefixes (partial last blocks included) are locked,
// inserted, unlocked, evicted, nibbled and demoted; after every operation
// each watched prompt whose slots were not named is matched again and must
// come out the same, and a prompt whose slots were named is re-watched.
func TestJournalNamesEveryMovedMatch(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		r := New(8)
		r.Journal(true)
		type watched struct {
			blocks []uint64
			last   int64
			m      Match
			slots  []Slot
		}
		prompt := func() ([]uint64, int64) {
			// Few distinct ids, so that prompts share and diverge often.
			n := 1 + rng.IntN(7)
			b := make([]uint64, n)
			for i := range b {
				b[i] = uint64(1 + rng.IntN(3) + 10*i*rng.IntN(2))
			}
			return b, int64(1 + rng.IntN(8))
		}
		watch := func(w *watched) {
			w.m = r.Match(w.blocks, w.last)
			w.slots = w.slots[:0]
			look, lok, up, uok := r.MatchSlots(w.blocks, w.m)
			if lok {
				w.slots = append(w.slots, look)
			}
			if uok {
				w.slots = append(w.slots, up)
			}
		}
		ws := make([]*watched, 12)
		for i := range ws {
			b, l := prompt()
			ws[i] = &watched{blocks: b, last: l}
			watch(ws[i])
		}
		var locks []int32
		for step := 0; step < 300; step++ {
			now := float64(step)
			switch op := rng.IntN(12); {
			case op < 5:
				b, l := prompt()
				m := r.Lock(b, l, now)
				n, _ := r.Insert(m.Node, b, m.Blocks, l, now)
				locks = append(locks, n)
			case op < 7:
				b, l := prompt()
				locks = append(locks, r.Lock(b, l, now).Node) // may split an edge
			case op < 9 && len(locks) > 0:
				i := rng.IntN(len(locks))
				r.Unlock(locks[i], now)
				locks = append(locks[:i], locks[i+1:]...)
			case op < 10:
				r.Evict(int64(rng.IntN(30)))
			case op < 11:
				r.Nibble(int64(rng.IntN(20)))
			default:
				r.Demote(int32(rng.IntN(len(r.nodes))), 5) // reorders, changes no match
			}
			changed := map[Slot]bool{}
			for _, s := range r.TakeChanges() {
				changed[s] = true
			}
			for i, w := range ws {
				moved := false
				for _, s := range w.slots {
					moved = moved || changed[s]
				}
				if moved {
					watch(w)
					continue
				}
				if got := r.Match(w.blocks, w.last); got.Blocks != w.m.Blocks || got.Tokens != w.m.Tokens {
					t.Fatalf("seed %d step %d: prompt %d %v (last %d) now matches %d blocks/%d tokens, was %d/%d, and no change named its slots %v",
						seed, step, i, w.blocks, w.last, got.Blocks, got.Tokens, w.m.Blocks, w.m.Tokens, w.slots)
				}
			}
			checkRadix(t, r)
		}
	}
}
