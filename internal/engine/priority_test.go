package engine

import "testing"

// With priority eviction a prefill worker's cache evicts a seed's prompt
// (low priority: a decoder keeps the session) before an older plain-PD
// prompt; without it LRU takes the older one. A prefix both share is kept.
func TestPrefillPriorityEviction(t *testing.T) {
	for _, prio := range []bool{false, true} {
		w, err := New(Config{Name: "p", Role: RolePrefill, Profile: testProfile(t), BlockSize: 64, PoolTokens: 20000, PrefixCache: true,
			PriorityEviction: prio})
		if err != nil {
			t.Fatal(err)
		}
		shared := chain(9, 20)
		plain := append(append([]uint64(nil), shared...), chain(1, 100)...)
		seed := append(append([]uint64(nil), shared...), chain(2, 100)...)
		now := 0.0
		for i, c := range []struct {
			blocks []uint64
			low    bool
		}{{plain, false}, {seed, true}} {
			r := &Request{ID: int64(i + 1), Kind: PrefillOnly, Blocks: c.blocks, Input: 64 * len(c.blocks), LowPriority: c.low}
			if err := w.Submit(now, r); err != nil {
				t.Fatal(err)
			}
			now, _ = drive(w, now)
			if err := w.Release(now, r); err != nil {
				t.Fatal(err)
			}
			now++
		}
		// A third prompt needs room for all but about one of them.
		third := &Request{ID: 3, Kind: PrefillOnly, Blocks: chain(3, 150), Input: 9600}
		if err := w.Submit(now, third); err != nil {
			t.Fatal(err)
		}
		drive(w, now)
		checkPool(t, w)
		plainLeft, seedLeft := w.PrefixMatch(plain, 64*len(plain)), w.PrefixMatch(seed, 64*len(seed))
		if prio && (seedLeft > 64*20 || plainLeft < 64*len(plain)-64) {
			t.Fatalf("priority eviction: %d tokens of the plain-PD prompt and %d of the seed's left; want the seed's gone first", plainLeft, seedLeft)
		}
		if !prio && (plainLeft > 64*20 || seedLeft < 64*len(seed)-64) {
			t.Fatalf("LRU: %d tokens of the older plain-PD prompt and %d of the seed's left; want the older gone first", plainLeft, seedLeft)
		}
		if plainLeft < 64*20 || seedLeft < 64*20 {
			t.Fatalf("the shared prefix went: %d / %d tokens left", plainLeft, seedLeft)
		}
	}
}

// A colocated worker reuses a turn's output KV for the next turn's prompt;
// with SessionOutputOnly (the seed's trace replays) it re-prefills it.
func TestSessionOutputOnly(t *testing.T) {
	for _, only := range []bool{false, true} {
		w, err := New(Config{Name: "c", Role: RoleColocated, Profile: testProfile(t), BlockSize: 64, PoolTokens: 50000, PrefixCache: true,
			SessionOutputOnly: only})
		if err != nil {
			t.Fatal(err)
		}
		b := chain(1, 40)
		r1 := &Request{ID: 1, Kind: Full, Session: "s", Blocks: b[:20], Input: 1280, Output: 640}
		if err := w.Submit(0, r1); err != nil {
			t.Fatal(err)
		}
		now, _ := drive(w, 0)
		r2 := &Request{ID: 2, Kind: Full, Session: "s", Blocks: b, Input: 2560, Output: 4}
		if err := w.Submit(now, r2); err != nil {
			t.Fatal(err)
		}
		drive(w, now)
		checkPool(t, w)
		if want := map[bool]int{false: 1280 + 576, true: 1280}[only]; r2.CachedTokens != want {
			t.Fatalf("session output only %t: turn 2 cached %d tokens, want %d", only, r2.CachedTokens, want)
		}
	}
}
