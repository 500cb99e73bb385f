package engine

import (
	"math/rand/v2"
	"testing"
)

// TestWaitOrderFamilies is TestWaitOrderProperty with prompts long enough
// to join families (64 blocks and more) of a few shared prefixes, each
// prompt diverging at a random block (inside what the cache holds as one
// edge, or past it): every cached match and uncached count, the heap and
// the next request held to brute force after every step, the families
// holding exactly the tracked waiting requests, and the skips reached. A
// prompt's blocks are overwritten once its prefill is done, as an owner
// reusing them may.
func TestWaitOrderFamilies(t *testing.T) {
	var skipped uint64
	for _, shortest := range []bool{true, false} {
		for seed := uint64(1); seed <= 4; seed++ {
			rng := rand.New(rand.NewPCG(seed, 13))
			cfg := Config{Name: "w", Role: RoleColocated, Profile: testProfile(t), BlockSize: 16, PoolTokens: 9000, ChunkTokens: 1024,
				MaxRunning: 4, PrefixCache: true, ShortestFirst: shortest, MaxWaitS: 0.05}
			if !shortest {
				cfg.Session = SessionConfig{Enabled: true, BypassTokens: 512}
			}
			w, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var live []*Request
			now := 0.0
			for step := 0; step < 500; step++ {
				if rng.IntN(3) > 0 {
					fam := uint64(1 + rng.IntN(3))
					n := familyMinBlocks - 8 + rng.IntN(100)
					blocks := chain(fam, n)
					for i := rng.IntN(n + 1); i < n; i++ {
						blocks[i] = uint64(step)<<40 | uint64(i)
					}
					in := (n-1)*16 + 1 + rng.IntN(16)
					r := &Request{ID: int64(step), Kind: Full, Blocks: blocks, Input: in, Output: 1 + rng.IntN(8)}
					if !shortest {
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
					for _, ev := range w.TakeEvents() {
						if ev.Kind == EvFirstToken {
							// The owner may reuse a prompt's storage once
							// its prefill is done: a family's anchor must
							// not read it then.
							for i := range ev.Req.Blocks {
								ev.Req.Blocks[i] = 1<<63 | uint64(step)<<20 | uint64(i)
							}
						}
					}
				} else {
					now += 0.001
				}
				checkOrder(t, w, now)
				checkPool(t, w)
				checkFamilies(t, w)
			}
			skipped += w.order.skipped
		}
	}
	if skipped == 0 {
		t.Fatal("no match skipped a block: the families are not reached")
	}
}

// checkFamilies: every tracked waiting request of familyMinBlocks blocks
// or more is in the family of its first block, no other request is, and
// each family counts its members.
func checkFamilies(t *testing.T, w *Worker) {
	t.Helper()
	o := &w.order
	members := map[*waitFamily]int{}
	n := 0
	for i := w.waiting.head; i < len(w.waiting.items); i++ {
		r := w.waiting.items[i]
		if r == nil || !r.wait.track || len(r.Blocks) < familyMinBlocks {
			continue
		}
		n++
		ref, ok := o.famOf[r]
		if !ok || o.fams[r.Blocks[0]] != ref.f {
			t.Fatalf("waiting request %d is not in its prompt's family", r.ID)
		}
		members[ref.f]++
	}
	if len(o.famOf) != n || len(members) != len(o.fams) {
		t.Fatalf("%d requests in %d families, %d waiting in %d", len(o.famOf), len(o.fams), n, len(members))
	}
	for f, c := range members {
		if f.members != c {
			t.Fatalf("a family counts %d members, holds %d", f.members, c)
		}
	}
}
