package engine

import "testing"

// windowSettle takes released parts back only while the pool has handed
// out more than it has free without them. 64-token budget (hold cap
// 112): A (256 tokens, 2 output) is admitted for 256 + 1 less its sliding
// half beyond the hold cap, ⌊(256 − 112) / 16⌋ · 16 / 2 = 72: 185. After
// its prefill it holds its 256 cached tokens and its first output token
// less the 224 released sliding tokens' 112: 145. In a 257-token pool
// 112 are free, exactly the released parts' 112: nothing is taken back.
// In a 256-token pool, 111 free: the released node goes.
func TestMutWindowSettleAtTheBoundary(t *testing.T) {
	for _, c := range []struct {
		pool int64
		gone int64
	}{{257, 0}, {256, 224}} {
		cfg := windowAdmitProfile(1, c.pool)
		cfg.PrefixCache = true
		w, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		w.Submit(0, &Request{ID: 1, Kind: Full, Input: 256, Output: 2, Blocks: idRange(1, 16)})
		drive(w, 0)
		w.windowSettle()
		if w.tree.GoneTokens() != c.gone || w.tree.Tokens() != 256 {
			t.Errorf("pool %d: %d gone of %d cached, want %d of 256", c.pool, w.tree.GoneTokens(), w.tree.Tokens(), c.gone)
		}
	}
}

// What counting a request just locked on released nodes would free is
// net of what its window takes back: A (blocks 1–16) left blocks 0–13
// released; R (A's first 8 blocks and 4 of its own) locked on A's 8, at
// 96 skipped (6 blocks, all on its path): nothing new to release, blocks
// 6–7 (32 tokens) taken back as held: −32.
func TestMutWindowNewTokensTakesBackTheWindow(t *testing.T) {
	cfg := windowProfile(1)
	cfg.PoolTokens = 1 << 20
	cfg.PrefixCache = true
	w, _ := New(cfg)
	w.Submit(0, &Request{ID: 1, Kind: Full, Input: 256, Output: 2, Blocks: idRange(1, 16)})
	drive(w, 0)
	r := &Request{ID: 2, Kind: Full, Input: 192, Output: 2, Blocks: seqBlocks(idRange(1, 8), idRange(301, 4)), Stage: StagePrefill}
	m := w.tree.Lock(r.Blocks, 16, 1)
	r.node, r.locked = m.Node, true
	if got := w.windowNewTokens(r, 96); got != -32 {
		t.Errorf("counting 96 would free %d sliding tokens, want −32", got)
	}
}

// SGLang's sliding pool gives up cached sliding parts only while the
// holds, the cache and what is asked for pass it: a 500-slot pool (ratio
// 0.5 of 1,000) with A's 256 tokens cached: asking for 244 more fits
// exactly, 245 tombstones A's oldest released node (its first 14 blocks,
// released at its prefill).
func TestMutSWASettleAtTheBoundary(t *testing.T) {
	for _, c := range []struct {
		extra, gone int64
	}{{244, 0}, {245, 224}} {
		cfg := swaConfig(0.5, 1000)
		cfg.PrefixCache = true
		w, _ := New(cfg)
		w.Submit(0, &Request{ID: 1, Kind: Full, Input: 256, Output: 2, Blocks: idRange(1, 16)})
		drive(w, 0)
		w.swaSettle(c.extra)
		if w.tree.GoneTokens() != c.gone {
			t.Errorf("asking %d: %d tombstoned, want %d", c.extra, w.tree.GoneTokens(), c.gone)
		}
	}
}

// windowSettle takes back as many released nodes as the pool needs in one
// call. A1 and A2 (128 tokens each, own blocks) ran in a large pool: each
// left 128 − 31 = 97 → 96 tokens released, 48 pool tokens; the cache
// holds 256 − 96 = 160. With the pool cut to 200 (40 free, under the
// released 96): A1's goes (the older), 48 still over 40, A2's goes too.
func TestMutWindowSettleTakesWhatItNeeds(t *testing.T) {
	cfg := windowProfile(1)
	cfg.PoolTokens = 1 << 20
	cfg.PrefixCache = true
	w, _ := New(cfg)
	w.Submit(0, &Request{ID: 1, Kind: Full, Input: 128, Output: 2, Blocks: idRange(1, 8)})
	now, _ := drive(w, 0)
	w.Submit(now, &Request{ID: 2, Kind: Full, Input: 128, Output: 2, Blocks: idRange(101, 8)})
	drive(w, now)
	if w.Used() != 160 || w.tree.ReleasedTokens() != 192 {
		t.Fatalf("%d used, %d released; want 160, 192", w.Used(), w.tree.ReleasedTokens())
	}
	w.capacity = 200
	w.windowSettle()
	if w.tree.GoneTokens() != 192 {
		t.Errorf("%d tombstoned, want both nodes' 192", w.tree.GoneTokens())
	}
}

// Admission's credit is what a request adds to the freed count, net of
// what the others have counted already. 450-token pool, 64-token budget
// (hold cap 112), one sliding layer of two, no prefix cache: A (400
// tokens) is admitted holding its prompt less (400 − 112 → 288 skipped)
// / 2 = 144, 256 pool tokens, and one reserved: 193 free. B (300 tokens)
// would add (300 − 112 → 176) skipped, 464 counted in all: a credit of
// 232 − 144 = 88, so it needs 301 − 88 = 213 and waits; counting A's 288
// again (a credit of 376) would let it in at once.
func TestMutWindowAdmitCreditIsNetOfTheCount(t *testing.T) {
	w, err := New(windowAdmitProfile(1, 450))
	if err != nil {
		t.Fatal(err)
	}
	a := &Request{ID: 1, Kind: Full, Input: 400, Output: 10}
	b := &Request{ID: 2, Kind: Full, Input: 300, Output: 10}
	w.Submit(0, a)
	w.Submit(0, b)
	w.Advance(0)
	if a.Stage != StagePrefill || b.Stage != StageWaiting {
		t.Fatalf("stages %d, %d; want A prefilling, B waiting", a.Stage, b.Stage)
	}
	if got := w.windowAdmitCredit(b); got != 88 {
		t.Errorf("B's credit %d, want 88", got)
	}
}
