package idtable

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestTableMatchesMap: under any mix of ids (dense runs, gaps, negative,
// huge, old, repeated after a delete, values overwritten) and with most
// entries deleted oldest first (every other seed, where the window
// slides; in every fourth, one in 61 of them kept for good, which the
// window sheds to the map), the table answers as a map does, and its slice
// stays within eight slots an entry held.
func TestTableMatchesMap(t *testing.T) {
	slides := 0
	for seed := range uint64(40) {
		rng := rand.New(rand.NewPCG(seed, 11))
		var tab Table[int]
		want := map[int64]int{}
		var next, oldest int64
		fifo := seed%2 == 1
		peak := 0
		slid := false
		for op := range 20000 {
			var k int64
			drop := false
			switch r := rng.IntN(20); {
			case fifo && r < 8 && oldest < next:
				// Every fourth seed keeps one id in 61 for good (a long
				// session among short ones): the window sheds them.
				k, drop, oldest = oldest, seed%4 != 3 || oldest%61 != 0, oldest+1
			case r == 8:
				k = -1 - rng.Int64N(5)
			case r == 9:
				k = math.MaxInt64 - rng.Int64N(3)
			case r == 10:
				k = next + 1000 + rng.Int64N(5000)
			case r == 11 && seed%4 != 3: // old ids again, where none stays for good
				k = rng.Int64N(next + 1)
			default:
				k, next = next, next+1
			}
			if drop || rng.IntN(5) == 0 {
				tab.Delete(k)
				delete(want, k)
			} else {
				tab.Put(k, op)
				want[k] = op
			}
			w, in := want[k]
			if got, ok := tab.Get(k); ok != in || got != w {
				t.Fatalf("seed %d op %d id %d: got %d %v, want %v", seed, op, k, got, ok, want)
			}
			if tab.Len() != len(want) {
				t.Fatalf("seed %d op %d: len %d, want %d", seed, op, tab.Len(), len(want))
			}
			peak = max(peak, tab.held)
			slid = slid || tab.base > 0
		}
		for k, w := range want {
			if got, ok := tab.Get(k); !ok || got != w {
				t.Fatalf("seed %d id %d: got %d %v, want %d", seed, k, got, ok, w)
			}
		}
		for k := int64(-10); k < next+6010; k++ {
			_, in := want[k]
			if _, ok := tab.Get(k); ok != in {
				t.Fatalf("seed %d id %d: held %v, want %v", seed, k, ok, in)
			}
		}
		if len(tab.dense) > 8*(peak+1024) {
			t.Fatalf("seed %d: slice of %d for at most %d entries", seed, len(tab.dense), peak)
		}
		inMap, inRun := 0, 0 // of the ids between the oldest and the next: the window's run
		for k := range want {
			if k >= oldest && k < next {
				inRun++
				if _, ok := tab.other[k]; ok {
					inMap++
				}
			}
		}
		if fifo && inMap > inRun/4 {
			t.Fatalf("seed %d: oldest first, %d of the %d entries between the oldest and the newest in the map (base %d lo %d len %d held %d other %d oldest %d next %d)", seed, inMap, inRun, tab.base, tab.lo, len(tab.dense), tab.held, len(tab.other), oldest, next)
		}
		if slid {
			slides++
		}
	}
	if slides == 0 {
		t.Error("no table's window slid")
	}
}

// TestPutOfAnIdInTheMap: an id put far past the window, then put again
// once the window may grow to it, is one entry, with the later value.
func TestPutOfAnIdInTheMap(t *testing.T) {
	var tab Table[int]
	tab.Put(5000, 1) // past 2·0 + 1,024: the map
	for id := range int64(2101) {
		tab.Put(id, 0)
	}
	tab.Put(5000, 2) // within 2·2,101 + 1,024 of the oldest, past the slice
	if v, ok := tab.Get(5000); !ok || v != 2 || tab.Len() != 2102 {
		t.Fatalf("got %d %v, %d entries; want 2, true, 2102", v, ok, tab.Len())
	}
}

// TestTableShedsOldIDs: the sessions' pattern — ids in order, each deleted
// 200 later, while a few old ones stay held for good — keeps the ids in use
// in the slice and the slice within the ids in use: the old ones go to the
// map (without shed every id past the first straggler's reach went there,
// a map probe a get). Every answer is a map's.
func TestTableShedsOldIDs(t *testing.T) {
	var tab Table[int]
	want := map[int64]int{}
	const n, live = 200000, 200
	for id := range int64(n) {
		tab.Put(id, int(id))
		want[id] = int(id)
		if old := id - live; old >= 0 && old%50000 != 7 { // 7, 50,007, … stay
			tab.Delete(old)
			delete(want, old)
		}
		if id%997 == 0 {
			for k := id - 2*live; k <= id+1; k++ {
				v, ok := tab.Get(k)
				if w, in := want[k]; ok != in || v != w {
					t.Fatalf("at %d: id %d got %d %v, want %d %v", id, k, v, ok, w, in)
				}
			}
		}
	}
	if tab.Len() != len(want) {
		t.Fatalf("len %d, want %d", tab.Len(), len(want))
	}
	if len(tab.other) > 4 || len(tab.dense) > 8*(live+1024) {
		t.Fatalf("%d ids in the map (the %d old ones held, want at most those), slice of %d for %d in use",
			len(tab.other), 4, len(tab.dense), live)
	}
}
