package trace

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The chat table answers as a map would under any mix of ids: dense runs,
// gaps, negative, huge and repeated-after-delete ids; and with most
// records deleted oldest first (every fifth seed), as a checker that
// forgets or closes sessions deletes them, where the window slides.
func TestChatTableMatchesMap(t *testing.T) {
	slides := 0
	defer func() {
		if slides == 0 {
			t.Error("no table's window slid")
		}
	}()
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var tab chatTable
		want := map[int64]chatRef{}
		var next, oldest int64
		fifo := seed%5 == 4
		peak, slid, drop := 0, false, false
		id := func() int64 {
			if fifo && rng.IntN(3) > 0 {
				if rng.IntN(2) == 0 && oldest < next {
					oldest++
					drop = true
					return oldest - 1 // the oldest, to delete
				}
				next++
				return next - 1
			}
			switch rng.IntN(10) {
			case 0:
				return -1 - rng.Int64N(5)
			case 1:
				return math.MaxInt64 - rng.Int64N(3)
			case 2:
				return next + 1000 + rng.Int64N(5000) // past the dense bound, often
			case 3:
				return rng.Int64N(next + 1) // an old id
			default:
				next++
				return next - 1
			}
		}
		for op := range 20000 {
			drop = false
			k := id()
			r := chatRef{sess: int32(op), turn: int32(rng.IntN(9)), line: int32(op + 1), ts: float64(op)}
			if drop || rng.IntN(4) == 0 {
				tab.del(k)
				delete(want, k)
			} else if _, ok := want[k]; !ok {
				tab.put(k, r)
				r.held = true
				want[k] = r
			}
			if got, ok := tab.get(k); ok != (want[k].held) || got != want[k] {
				t.Fatalf("seed %d op %d id %d: got %+v %v, want %+v", seed, op, k, got, ok, want[k])
			}
			if tab.len() != len(want) {
				t.Fatalf("seed %d op %d: len %d, want %d", seed, op, tab.len(), len(want))
			}
			peak, slid = max(peak, tab.held), slid || tab.base > 0
		}
		for k, w := range want {
			if got, ok := tab.get(k); !ok || got != w {
				t.Fatalf("seed %d id %d: got %+v %v, want %+v", seed, k, got, ok, w)
			}
		}
		for k := int64(-10); k < next+10; k++ {
			if _, ok := tab.get(k); ok != want[k].held {
				t.Fatalf("seed %d id %d: held %v, want %v", seed, k, ok, want[k].held)
			}
		}
		if len(tab.dense) > 8*(peak+1024) || (!fifo && len(tab.dense) > 4*(peak+1024)) {
			t.Fatalf("seed %d: slice of %d for at most %d records", seed, len(tab.dense), peak)
		}
		if fifo && len(tab.other) > len(want)/4 {
			t.Fatalf("seed %d: oldest first, %d of %d records in the map (base %d lo %d len %d held %d next %d oldest %d)", seed, len(tab.other), len(want), tab.base, tab.lo, len(tab.dense), tab.held, next, oldest)
		}
		slides += btoi(slid)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
