package engine

import (
	"math/rand/v2"

	"github.com/pdhybrid/pdhybrid/internal/radix"
	"slices"
	"testing"
)

// Shortest-first admission: a prefill worker busy with a 16,384-token
// prompt (four steps of 4,096) gets, in this order, prompts of 12,288,
// 4,096 and 1,024 tokens. In arrival order their prefills end in that
// order; shortest first the 1,024-token one ends first and the
// 12,288-token one last. With a bound of 0.5 ms every one of them has
// waited past it when the first prompt is done, and arrival order holds.
func TestShortestFirst(t *testing.T) {
	order := func(shortest bool, maxWait float64) []int {
		w, err := New(Config{Name: "p", Role: RolePrefill, Profile: testProfile(t), BlockSize: 64, PoolTokens: 400000, ChunkTokens: 4096,
			MaxRunning: 64, PrefixCache: true, ShortestFirst: shortest, MaxWaitS: maxWait})
		if err != nil {
			t.Fatal(err)
		}
		first := &Request{ID: 1, Kind: PrefillOnly, Blocks: chain(1, 256), Input: 16384, Output: 1}
		if err := w.Submit(0, first); err != nil {
			t.Fatal(err)
		}
		w.Advance(0) // the owner's first step: the worker plans it
		rs := []*Request{
			{ID: 2, Kind: PrefillOnly, Blocks: chain(2, 192), Input: 12288, Output: 1},
			{ID: 3, Kind: PrefillOnly, Blocks: chain(3, 64), Input: 4096, Output: 1},
			{ID: 4, Kind: PrefillOnly, Blocks: chain(4, 16), Input: 1024, Output: 1},
		}
		for i, r := range rs {
			if err := w.Submit(0.001*float64(i+1), r); err != nil {
				t.Fatal(err)
			}
		}
		drive(w, 0.004)
		checkPool(t, w)
		var ids []int
		for len(ids) < len(rs) {
			next := (*Request)(nil)
			for _, r := range rs {
				if !slices.Contains(ids, int(r.ID)) && (next == nil || r.PrefillEndAt < next.PrefillEndAt) {
					next = r
				}
			}
			ids = append(ids, int(next.ID))
		}
		return ids
	}
	for _, tc := range []struct {
		shortest bool
		maxWait  float64
		want     []int
	}{
		{false, 0, []int{2, 3, 4}},
		{true, 0, []int{4, 3, 2}},
		{true, 0.0005, []int{2, 3, 4}}, // every one has waited past the bound: arrival order
	} {
		if got := order(tc.shortest, tc.maxWait); !slices.Equal(got, tc.want) {
			t.Errorf("shortest %v, max wait %v s: admitted %v, want %v", tc.shortest, tc.maxWait, got, tc.want)
		}
	}
}

// checkOrder recomputes what the waiting order caches: every watched
// request's match against the tree as it stands, the heap's order, and the
// request admission would take next, brute force.
func checkOrder(t *testing.T, w *Worker, now float64) {
	t.Helper()
	w.syncOrder()
	o := &w.order
	for i := w.waiting.head; i < len(w.waiting.items); i++ {
		r := w.waiting.items[i]
		if r == nil {
			continue
		}
		if r.wait.track {
			fresh := w.tree.Match(r.Blocks, w.lastBlockTokens(r.Input, len(r.Blocks)))
			if !r.wait.fresh || r.memo.m.Tokens != fresh.Tokens || r.memo.m.Blocks != fresh.Blocks {
				t.Fatalf("t=%v: request %d's cached match %d blocks/%d tokens (fresh %v), the tree's %d/%d",
					now, r.ID, r.memo.m.Blocks, r.memo.m.Tokens, r.wait.fresh, fresh.Blocks, fresh.Tokens)
			}
		}
		if unc := w.uncachedNow(r); unc != r.wait.unc {
			t.Fatalf("t=%v: request %d caches %d uncached tokens, has %d", now, r.ID, r.wait.unc, unc)
		}
	}
	if !w.cfg.ShortestFirst {
		return
	}
	if len(o.heap) != w.waiting.len() {
		t.Fatalf("t=%v: heap holds %d requests, queue %d", now, len(o.heap), w.waiting.len())
	}
	for i := 1; i < len(o.heap); i++ {
		if int(o.heap[i].wait.hidx) != i+1 || o.less(i, (i-1)/2) {
			t.Fatalf("t=%v: heap order broken at %d", now, i)
		}
	}
	if w.waiting.len() == 0 {
		return
	}
	var best *Request
	for i := w.waiting.head; i < len(w.waiting.items); i++ {
		r := w.waiting.items[i]
		if r == nil {
			continue
		}
		aged := func(r *Request) bool { return w.cfg.MaxWaitS > 0 && now-r.SubmittedAt > w.cfg.MaxWaitS }
		switch {
		case best == nil:
			best = r
		case aged(best) || aged(r):
			if aged(r) && (!aged(best) || r.wait.seq < best.wait.seq) {
				best = r
			}
		case r.wait.unc < best.wait.unc || r.wait.unc == best.wait.unc && r.wait.seq < best.wait.seq:
			best = r
		}
	}
	if got := w.nextWaiting(now); got != best {
		t.Fatalf("t=%v: next waiting is request %d, brute force says %d", now, got.ID, best.ID)
	}
}

// TestWaitOrderProperty drives workers that keep a waiting queue (small
// pools, prompts sharing prefixes of a few families, partial last blocks,
// aborts) and checks the cached order against brute force after every
// step: shortest first with and without a wait bound, with and without the
// bypass, and arrival order with the bypass.
func TestWaitOrderProperty(t *testing.T) {
	for _, tc := range []struct {
		name     string
		shortest bool
		maxWait  float64
		bypass   int
	}{
		{"shortest", true, 0, 0},
		{"shortest-aged", true, 0.05, 0},
		{"shortest-bypass", true, 0.05, 512},
		{"fcfs-bypass", false, 0, 512},
	} {
		for seed := uint64(1); seed <= 4; seed++ {
			rng := rand.New(rand.NewPCG(seed, 3))
			cfg := Config{Name: "w", Role: RoleColocated, Profile: testProfile(t), BlockSize: 16, PoolTokens: 6000, ChunkTokens: 1024,
				MaxRunning: 6, PrefixCache: true, ShortestFirst: tc.shortest, MaxWaitS: tc.maxWait}
			if tc.bypass > 0 {
				cfg.Session = SessionConfig{Enabled: true, BypassTokens: tc.bypass}
			}
			w, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var live []*Request
			now := 0.0
			for step := 0; step < 600; step++ {
				if rng.IntN(3) > 0 {
					fam := uint64(1 + rng.IntN(4))
					n := 1 + rng.IntN(40)
					blocks := chain(fam, n)
					for i := rng.IntN(n + 1); i < n; i++ {
						blocks[i] = uint64(step)<<40 | uint64(i) // diverge from the family here
					}
					in := (n-1)*16 + 1 + rng.IntN(16)
					r := &Request{ID: int64(step), Kind: Full, Blocks: blocks, Input: in, Output: 1 + rng.IntN(8)}
					if tc.bypass > 0 {
						r.Session = "s" + string(rune('a'+rng.IntN(20)))
					}
					if err := w.Submit(now, r); err == nil {
						live = append(live, r)
					}
				}
				if len(live) > 0 && rng.IntN(25) == 0 {
					w.Abort(now, live[rng.IntN(len(live))])
				}
				if t2, ok := w.NextTime(); ok {
					now = max(now, t2)
					w.Advance(now)
					w.TakeEvents()
				} else {
					now += 0.001
				}
				checkOrder(t, w, now)
				checkPool(t, w)
				checkSpareWatch(t, w)
			}
		}
	}
}

// checkSpareWatch holds the emptied watch lists kept for reuse to their
// bounds, empty and holding no request (they must not keep one alive).
func checkSpareWatch(t *testing.T, w *Worker) {
	t.Helper()
	o := &w.order
	if len(o.spare) > maxSpareWatch {
		t.Fatalf("%d spare watch lists, at most %d", len(o.spare), maxSpareWatch)
	}
	for i, l := range o.spare {
		if len(l) != 0 || cap(l) > maxSpareWatchCap {
			t.Fatalf("spare watch list %d: len %d cap %d", i, len(l), cap(l))
		}
		for _, ref := range l[:cap(l)] {
			if ref.r != nil {
				t.Fatalf("spare watch list %d still holds request %d", i, ref.r.ID)
			}
		}
	}
}

// TestWaitOrderSharedSlotKeys drives shortest-first workers whose block ids
// are made so that the watch index's keys collide: with ids f ^ q·K
// (slotKey's multiplier K, q small) the slots (p, f ^ q·K) and
// (q, f ^ p·K) share a key, and the tree's node indexes are small. A
// shared key only makes a change at one slot match the other's requests
// again: the order must stay what brute force says, and the test checks
// that keys were in fact shared.
func TestWaitOrderSharedSlotKeys(t *testing.T) {
	const k = 0x9e3779b97f4a7c15
	shared := 0
	for seed := uint64(1); seed <= 4; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		w, err := New(Config{Name: "w", Role: RoleColocated, Profile: testProfile(t), BlockSize: 16, PoolTokens: 6000,
			ChunkTokens: 256, MaxRunning: 2, PrefixCache: true, ShortestFirst: true})
		if err != nil {
			t.Fatal(err)
		}
		now := 0.0
		for step := 0; step < 600; step++ {
			if rng.IntN(3) > 0 {
				n := 1 + rng.IntN(30)
				blocks := make([]uint64, n)
				for i := range blocks {
					blocks[i] = 5 ^ uint64(rng.IntN(64))*k
				}
				in := (n-1)*16 + 1 + rng.IntN(16)
				_ = w.Submit(now, &Request{ID: int64(step), Kind: Full, Blocks: blocks, Input: in, Output: 1 + rng.IntN(8)})
			}
			if t2, ok := w.NextTime(); ok {
				now = max(now, t2)
				w.Advance(now)
				w.TakeEvents()
			} else {
				now += 0.001
			}
			checkOrder(t, w, now)
			keys := map[uint64]radix.Slot{}
			for i := w.waiting.head; i < len(w.waiting.items); i++ {
				r := w.waiting.items[i]
				if r == nil || !r.wait.track {
					continue
				}
				look, lookOK, up, upOK := w.tree.MatchSlots(r.Blocks, r.memo.m)
				for _, s := range []struct {
					s  radix.Slot
					ok bool
				}{{look, lookOK}, {up, upOK}} {
					if !s.ok {
						continue
					}
					if o, seen := keys[slotKey(s.s)]; seen && o != s.s {
						shared++
					}
					keys[slotKey(s.s)] = s.s
				}
			}
		}
	}
	if shared == 0 {
		t.Fatal("no two watched slots shared a key: the test exercises nothing")
	}
	t.Logf("%d shared keys seen", shared)
}
