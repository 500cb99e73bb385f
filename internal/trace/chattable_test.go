package trace

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The chat table answers as a map would under any mix of ids: dense runs,
// gaps, negative, huge and repeated-after-delete ids, map-only or not.
func TestChatTableMatchesMap(t *testing.T) {
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 7))
		tab := chatTable{mapOnly: seed%5 == 4}
		want := map[int64]chatRef{}
		var next int64
		id := func() int64 {
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
		for op := range 5000 {
			k := id()
			r := chatRef{sess: int32(op), turn: int32(rng.IntN(9)), line: int32(op + 1), ts: float64(op)}
			if rng.IntN(4) == 0 {
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
		if tab.mapOnly && len(tab.dense) != 0 {
			t.Fatalf("seed %d: a map-only table grew a slice of %d", seed, len(tab.dense))
		}
		if len(tab.dense) > 4*(tab.held+1024) {
			t.Fatalf("seed %d: slice of %d for %d records", seed, len(tab.dense), tab.held)
		}
	}
}
