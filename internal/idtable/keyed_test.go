package idtable

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestKeyedMatchesMap: records by number and by id (each id always
// numbered or never, as the contract asks), put, overwritten and deleted
// at random, are found as a map keyed by the whole Key finds them.
func TestKeyedMatchesMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 25))
	var m Keyed[int]
	want := map[Key]int{}
	for op := range 20000 {
		j := rng.IntN(3000)
		k := Key{ID: fmt.Sprint("s", j)}
		if j%2 == 0 { // numbered sessions keep their number (a number names one id)
			k.Num = int64(j) + 1
		}
		if rng.IntN(3) == 0 {
			m.Delete(k)
			delete(want, k)
		} else {
			m.Put(k, op)
			want[k] = op
		}
		if got, ok := m.Get(k); got != want[k] || ok != hasKey(want, k) {
			t.Fatalf("op %d key %v: got %d %v, want %d", op, k, got, ok, want[k])
		}
	}
	if m.Len() != len(want) {
		t.Fatalf("len %d, want %d", m.Len(), len(want))
	}
	n := 0
	m.Each(func(int) { n++ })
	if n != len(want) {
		t.Fatalf("Each saw %d records, want %d", n, len(want))
	}
	m.DeleteIf(func(v int) bool { return v%3 == 0 })
	for k, v := range want {
		if v%3 == 0 {
			delete(want, k)
		}
		if got, ok := m.Get(k); ok != (v%3 != 0) || ok && got != v {
			t.Fatalf("after DeleteIf: key %v got %d %v", k, got, ok)
		}
	}
	if m.Len() != len(want) {
		t.Fatalf("after DeleteIf: len %d, want %d", m.Len(), len(want))
	}
}

func hasKey(m map[Key]int, k Key) bool {
	_, ok := m[k]
	return ok
}

// TestKeyedWorkerSessions: one worker of seven gets every seventh session
// number and holds each for the next 3,003 numbers (a decoder's pinned
// sessions, evicted oldest first), a few for good: what it holds stays in
// the slice, not the map.
func TestKeyedWorkerSessions(t *testing.T) {
	var m Keyed[*int]
	v := new(int)
	const pool, hold = 7, 7 * 429
	for num := int64(1); num < 300000; num += pool {
		m.Put(Key{ID: "s", Num: num}, v)
		if old := num - hold; old > 0 && old%50000 > pool {
			m.Delete(Key{ID: "s", Num: old})
		}
	}
	held := m.Len()
	if other := len(m.byNum.other); other > 10 {
		t.Fatalf("%d of %d held sessions in the map, want at most the few kept for good", other, held)
	}
	if len(m.byNum.dense) > 16*(held+1024) {
		t.Fatalf("slice of %d for %d sessions", len(m.byNum.dense), held)
	}
}

// TestTableShrinksAfterABurst: a window that grew for a burst of ids held
// at once gives the slice back once they are gone and the ids in use fit
// in a quarter of it; every answer is a map's.
func TestTableShrinksAfterABurst(t *testing.T) {
	var tab Table[int]
	want := map[int64]int{}
	id := int64(0)
	put := func(n, live int) {
		for range n {
			tab.Put(id, int(id))
			want[id] = int(id)
			if old := id - int64(live); old >= 0 {
				tab.Delete(old)
				delete(want, old)
			}
			id++
		}
	}
	put(100000, 20000) // 20,000 at once: the slice grows past 32,768
	peak := len(tab.dense)
	for old := id - 20000; old < id-200; old++ { // the burst ends
		tab.Delete(old)
		delete(want, old)
	}
	put(200000, 200) // then 200 at once
	if len(tab.dense) > peak/4 || len(tab.dense) > 8*(200+1024) {
		t.Fatalf("slice of %d after the burst (peak %d) for 200 held", len(tab.dense), peak)
	}
	for k := id - 400; k < id+10; k++ {
		v, ok := tab.Get(k)
		if w, in := want[k]; ok != in || v != w {
			t.Fatalf("id %d: got %d %v, want %d %v", k, v, ok, w, in)
		}
	}
	if tab.Len() != len(want) {
		t.Fatalf("len %d, want %d", tab.Len(), len(want))
	}
}
