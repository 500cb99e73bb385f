package radix

import (
	"math/rand"
	"testing"
)

// The edge table against a map over random sets, replacements and
// deletions, with few distinct keys (long probe runs, wrapping at the
// table's end, deletions inside them) and with keys that differ only in
// high bits: every filed edge found, every other key absent, the count
// right, after every step.
func TestEdgeTableIsAMap(t *testing.T) {
	type key struct {
		parent int32
		first  uint64
	}
	for seed := int64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewSource(seed))
		var tab edgeTable
		want := map[key]int32{}
		keyOf := func() key {
			k := key{parent: int32(rng.Intn(6)), first: uint64(rng.Intn(40))}
			if seed%2 == 0 {
				k.first <<= 40 // high bits only
			}
			return k
		}
		for step := 0; step < 3000; step++ {
			k := keyOf()
			switch op := rng.Intn(10); {
			case op < 5:
				c := int32(1 + rng.Intn(1000))
				if got, w := tab.set(k.parent, k.first, c), want[k]; got != w {
					t.Fatalf("seed %d step %d: set %v replaced %d, want %d", seed, step, k, got, w)
				}
				want[k] = c
			default:
				tab.del(k.parent, k.first)
				delete(want, k)
			}
			if tab.n != len(want) {
				t.Fatalf("seed %d step %d: %d edges filed, want %d", seed, step, tab.n, len(want))
			}
			for p := int32(0); p < 6; p++ {
				for f := uint64(0); f < 40; f++ {
					k := key{p, f}
					if seed%2 == 0 {
						k.first <<= 40
					}
					c, ok := tab.get(k.parent, k.first)
					if w, wok := want[k]; c != w || ok != wok {
						t.Fatalf("seed %d step %d: get %v = %d %v, want %d %v", seed, step, k, c, ok, w, wok)
					}
				}
			}
		}
	}
}

// A tree's child links follow its nodes through inserts that split edges,
// evictions, nibbles and path evictions under many roots' children: Check
// holds the table and the children's lists to the nodes after each step.
func TestEdgesFollowTheTree(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	r := New(4)
	var locked []int32
	for step := 0; step < 4000; step++ {
		switch op := rng.Intn(10); {
		case op < 6:
			n := 1 + rng.Intn(12)
			blocks := make([]uint64, n)
			blocks[0] = uint64(rng.Intn(30))
			for i := 1; i < n; i++ {
				blocks[i] = blocks[i-1]*3 + uint64(rng.Intn(3))
			}
			m := r.Lock(blocks, 4, float64(step))
			c, _ := r.Insert(m.Node, blocks, m.Blocks, int64(1+rng.Intn(4)), float64(step))
			if rng.Intn(3) == 0 {
				locked = append(locked, c)
			} else {
				r.Unlock(c, float64(step))
			}
		case op < 7 && len(locked) > 0:
			i := rng.Intn(len(locked))
			r.Unlock(locked[i], float64(step))
			locked = append(locked[:i], locked[i+1:]...)
		case op < 8:
			r.Evict(int64(1 + rng.Intn(40)))
		case op < 9:
			r.Nibble(int64(1 + rng.Intn(10)))
		default:
			if len(r.lru) > 0 {
				r.EvictPath(r.lru[0].node)
			}
		}
		if err := r.Check(); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
}
