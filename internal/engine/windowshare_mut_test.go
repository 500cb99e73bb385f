package engine

import "testing"

// The count's split between the prefix cache and the request's own
// tokens, by hand: one sliding layer of two, window 32, 16-token blocks.
// A's 192-token prompt (blocks 1–12) ran and is cached, its first 10
// blocks released (192 − 31 = 161 → 160 skipped). R (256 tokens: A's 12
// blocks and 4 of its own) is locked on A's path, prefilling.
//
// At 224 skipped (14 blocks): 12 on its path, 32 tokens its own. What
// counting it would free: its 32 own, and A's blocks 10–11, which no
// other holder needs, 32; A's first 10 are released already: 64. Counted:
// 32 own tokens, 192 released. Its prompt then enters the cache (16
// blocks on its path), and at 240 skipped (15 blocks) all of them lie on
// the path: its own count falls to 0 and 240 are released. Uncounted,
// the released nodes stay released, nothing is its own.
func TestMutWindowCountSplitsCacheAndOwn(t *testing.T) {
	cfg := windowProfile(1)
	cfg.PoolTokens = 1 << 20
	cfg.PrefixCache = true
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.Submit(0, &Request{ID: 1, Kind: Full, Input: 192, Output: 2, Blocks: idRange(1, 12)})
	drive(w, 0)
	if got := w.tree.ReleasedTokens(); got != 160 {
		t.Fatalf("A left %d released, want 160", got)
	}
	r := &Request{ID: 2, Kind: Full, Input: 256, Output: 10, Blocks: seqBlocks(idRange(1, 12), idRange(101, 4)), Stage: StagePrefill}
	m := w.tree.Lock(r.Blocks, 16, 1)
	r.node, r.locked = m.Node, true
	if got := w.windowNewTokens(r, 224); got != 64 {
		t.Errorf("counting 224 would free %d sliding tokens, want 64", got)
	}
	w.windowCount(1, r, 224)
	if w.windowTok != 32 || r.windowOwn() != 32 || w.tree.ReleasedTokens() != 192 || w.windowFreedNow() != 112 {
		t.Errorf("at 224: %d own (request %d), %d released, %d freed; want 32, 32, 192, 112",
			w.windowTok, r.windowOwn(), w.tree.ReleasedTokens(), w.windowFreedNow())
	}
	if got := w.windowNewTokens(r, 224); got != 0 {
		t.Errorf("counting 224 again would free %d, want 0", got)
	}
	r.node, _ = w.tree.Insert(r.node, r.Blocks, m.Blocks, 16, 2)
	w.windowCount(2, r, 240)
	if w.windowTok != 0 || r.windowOwn() != 0 || w.tree.ReleasedTokens() != 240 {
		t.Errorf("at 240 in the cache: %d own (request %d), %d released; want 0, 0, 240", w.windowTok, r.windowOwn(), w.tree.ReleasedTokens())
	}
	w.windowUncount(r)
	w.tree.Unlock(r.node, 3)
	if w.windowTok != 0 || r.windowPassed() != 0 || w.tree.ReleasedTokens() != 240 {
		t.Errorf("uncounted: %d own, passed node %d, %d released; want 0, 0, 240", w.windowTok, r.windowPassed(), w.tree.ReleasedTokens())
	}
	if err := w.tree.Check(); err != nil {
		t.Error(err)
	}
}
