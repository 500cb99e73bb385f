package engine

import "testing"

// A cached prompt's released sliding blocks are reused when the pool
// needs them, oldest released first, and a later match then needs the
// window before its end intact (vLLM's find_longest_cache_hit). One
// sliding layer of two, window 32, 16-token blocks: a match needs
// cdiv(31, 16) = 2 blocks (32 tokens) untombstoned before its end.
// 400-token pool.
//
// A (256 tokens, blocks 1–16, 2 output tokens) prefills: 256 − 31 = 225
// → 224 skipped, 14 blocks released, and ends: the cache holds 256
// tokens, 256 − 112 = 144 pool tokens. B (200 tokens of its own, 2
// output) is admitted for 200 + 1 of the 256 free; its prefill passes
// 169 → 160 tokens (10 blocks): used 144 + 201 − 80 = 265, free 135,
// while the released sliding parts are (224 + 160) / 2 = 192 pool tokens:
// 57 of them are handed out, so the pool reuses the oldest released, A's
// 14 blocks (one node): a tombstone. B ends: used 256 − 112 + 200 − 80 =
// 264. D (A's 16 blocks and 4 of its own, 320 tokens) then matches all
// 16: A's last 2 blocks are intact, a window, so 256 tokens are cached
// (it needs 64 + 1 of the 136 free). C (A's first 8 blocks and 4 of its
// own) matches 8 blocks inside the tombstone: no window intact before
// them, so nothing is cached (before: 128 tokens); it needs 192 + 1 of
// the 104 free (the cache's 520 tokens less 448 / 2 freed: A's gone 224,
// B's 160, D's 64 released), so the least recently used prompt, B's 200
// tokens, is evicted.
func TestVLLMWindowTombstoneCutsTheMatch(t *testing.T) {
	cfg := windowProfile(1)
	cfg.PoolTokens = 400
	cfg.PrefixCache = true
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.Submit(0, &Request{ID: 1, Kind: Full, Input: 256, Output: 2, Blocks: idRange(1, 16)})
	now, _ := drive(w, 0)
	if w.Used() != 144 || w.tree.ReleasedTokens() != 224 {
		t.Fatalf("after A: %d used, %d released; want 144, 224", w.Used(), w.tree.ReleasedTokens())
	}
	b := &Request{ID: 2, Kind: Full, Input: 200, Output: 2, Blocks: idRange(1001, 13)}
	w.Submit(now, b)
	w.Advance(now)
	t1, _ := w.NextTime()
	w.Advance(t1) // B's prefill
	if w.Used() != 265 || w.tree.GoneTokens() != 224 || w.tree.ReleasedTokens() != 160 {
		t.Fatalf("after B's prefill: %d used, %d gone, %d released; want 265, 224 (A's), 160 (B's)",
			w.Used(), w.tree.GoneTokens(), w.tree.ReleasedTokens())
	}
	now, _ = drive(w, t1)
	if w.Used() != 264 {
		t.Fatalf("after B: %d used, want 264", w.Used())
	}
	d := &Request{ID: 4, Kind: Full, Input: 320, Output: 2, Blocks: seqBlocks(idRange(1, 16), idRange(401, 4))}
	w.Submit(now, d)
	now, _ = drive(w, now)
	// A prompt of A's first 15 blocks would have 1 block, 16 tokens,
	// after the tombstone: short of 2, so it matches nothing.
	if m := w.tree.Match(seqBlocks(idRange(1, 15), idRange(501, 4)), 16); m.Blocks != 0 {
		t.Errorf("A's first 15 blocks match %d blocks, want 0", m.Blocks)
	}
	c := &Request{ID: 3, Kind: Full, Input: 192, Output: 2, Blocks: seqBlocks(idRange(1, 8), idRange(301, 4))}
	w.Submit(now, c)
	drive(w, now)
	if c.CachedTokens != 0 || d.CachedTokens != 256 || w.Stats().EvictedTokens != 200 {
		t.Errorf("C cached %d, D cached %d, %d evicted; want 0 (inside the tombstone), 256 (a window intact before its end), 200",
			c.CachedTokens, d.CachedTokens, w.Stats().EvictedTokens)
	}
	if err := w.tree.Check(); err != nil {
		t.Error(err)
	}
}

// The pool takes released sliding parts back only when it needs them:
// with room to spare, C (A's first 8 blocks and 4 of its own, as above)
// hits A's 8 blocks, released but cached, and the 2 of them inside its
// window (A's 7th and 8th: at admission C has computed its 128 cached
// tokens, 128 − 31 = 97 → 96 skipped, 6 blocks) are taken back as held,
// as vLLM takes a hit's cached blocks off its free queue: 32 sliding
// tokens, 16 pool tokens. 4,000-token pool: after A, 144 used; C's
// admission 144 + 16 + its own 64 = 224 (208 without the take-back; its
// first output token is reserved).
// Its prefill then passes 161 → 160 tokens, 10 blocks: those 2 again and
// 2 of its own: the cache's 320 tokens less (96 + 32 + 32 + A's other 96)
// / 2 = 128, plus its first output token: 193.
func TestVLLMWindowHitHoldsItsWindowAgain(t *testing.T) {
	cfg := windowProfile(1)
	cfg.PoolTokens = 4000
	cfg.PrefixCache = true
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.Submit(0, &Request{ID: 1, Kind: Full, Input: 256, Output: 2, Blocks: idRange(1, 16)})
	now, _ := drive(w, 0)
	c := &Request{ID: 3, Kind: Full, Input: 192, Output: 2, Blocks: seqBlocks(idRange(1, 8), idRange(301, 4))}
	w.Submit(now, c)
	w.Advance(now)
	if c.CachedTokens != 128 || w.Used() != 224 {
		t.Fatalf("C admitted with %d cached, %d used; want 128, 224", c.CachedTokens, w.Used())
	}
	t1, _ := w.NextTime()
	w.Advance(t1) // C's prefill
	if w.Used() != 193 || w.tree.GoneTokens() != 0 {
		t.Errorf("after C's prefill: %d used, %d gone; want 193, 0", w.Used(), w.tree.GoneTokens())
	}
}

// A hit that has passed nothing yet holds all of it: A (64 tokens, blocks
// 1–4) leaves its first 2 blocks released (64 − 31 = 33 → 32 skipped);
// B (A's first 2 blocks and 4 of its own, 96 tokens) hits 32 tokens, has
// computed 32 (32 − 31 = 1 → 0 skipped), so both hit blocks are inside
// its window and held again: used 64 − 16 (A's cache) + 16 + B's 64 =
// 128 at B's admission (112 if they stayed released).
func TestVLLMWindowHitInsideTheWindowIsHeld(t *testing.T) {
	cfg := windowProfile(1)
	cfg.PoolTokens = 4000
	cfg.PrefixCache = true
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.Submit(0, &Request{ID: 1, Kind: Full, Input: 64, Output: 2, Blocks: idRange(1, 4)})
	now, _ := drive(w, 0)
	if w.Used() != 48 {
		t.Fatalf("after A: %d used, want 48", w.Used())
	}
	b := &Request{ID: 2, Kind: Full, Input: 96, Output: 2, Blocks: seqBlocks(idRange(1, 2), idRange(301, 4))}
	w.Submit(now, b)
	w.Advance(now)
	if b.CachedTokens != 32 || w.Used() != 128 {
		t.Errorf("B admitted with %d cached, %d used; want 32, 128", b.CachedTokens, w.Used())
	}
}

// A finished turn's output keeps its freed sliding part: once the next
// turn names it in the cache, the blocks the turn's window had left
// behind are released there. A (session s, 64 tokens, blocks 1–4, 100
// output tokens) ends: its cache holds 64 tokens, 32 of them released at
// its prefill (64 − 31 = 33 → 32), and its tail 99 output tokens: used 64
// − 16 + 99 = 147. B (its next turn, 192 tokens, blocks 1–12) names the
// output's whole blocks up to (64 + 99) / 16 = 10 blocks; A's window had
// left 64 + 99 − 31 = 132 → 128 tokens, 8 blocks, behind at its end: 128
// released, 64 pool tokens: the cache holds 160 − 64 = 96 once the
// output is named (144 if it kept its sliding part until B's own window
// passes it). B is then admitted with 160 cached: 96 + its own 32 = 128.
func TestVLLMWindowNamedOutputReleasesWhatItsWindowPassed(t *testing.T) {
	cfg := windowProfile(1)
	cfg.PoolTokens = 1 << 20
	cfg.PrefixCache = true
	w, _ := New(cfg)
	w.Submit(0, &Request{ID: 1, Session: "s", Kind: Full, Input: 64, Output: 100, Blocks: idRange(1, 4)})
	now, _ := drive(w, 0)
	if w.Used() != 147 {
		t.Fatalf("after A: %d used, want 147", w.Used())
	}
	b := &Request{ID: 2, Session: "s", Kind: Full, Input: 192, Output: 2, Blocks: idRange(1, 12)}
	w.nameOutput(now, b) // as its admission does first
	if w.Used() != 96 || w.tree.ReleasedTokens() != 128 {
		t.Fatalf("output named: %d used, %d released; want 96, 128", w.Used(), w.tree.ReleasedTokens())
	}
	w.Submit(now, b)
	w.Advance(now)
	if b.CachedTokens != 160 || w.tree.ReleasedTokens() != 128 || w.Used() != 128 {
		t.Errorf("B admitted with %d cached, %d released, %d used; want 160, 128, 128", b.CachedTokens, w.tree.ReleasedTokens(), w.Used())
	}
}

// A tail takes over its turn's freed own tokens and gives them back when
// it goes: 48 sliding tokens counted freed past the turn's path move to
// its tail (24 pool tokens less evictable), and dropping the tail takes
// them out of the count.
func TestMutWindowTailCarriesTheFreedOutput(t *testing.T) {
	cfg := windowProfile(1)
	cfg.PoolTokens = 1 << 20
	cfg.PrefixCache = true
	w, _ := New(cfg)
	r := &Request{ID: 1, Kind: Full, Input: 64, Output: 100, generated: 100, Stage: StageDecoding}
	r.more().windowOwn = 48
	w.windowTok, w.windowFreed = 48, 24
	tail := &outputTail{tokens: 99}
	w.windowKeepTail(r, tail)
	if tail.slideOwn != 48 || r.windowOwn() != 0 || w.windowTailTok != 48 || w.windowEvictableLess() != 24 {
		t.Errorf("kept: tail %d, request %d, tails %d, evictable less %d; want 48, 0, 48, 24",
			tail.slideOwn, r.windowOwn(), w.windowTailTok, w.windowEvictableLess())
	}
	if want := int64(64 + 99 - 31); tail.slideSkip != want/16*16 {
		t.Errorf("tail skip %d, want %d", tail.slideSkip, want/16*16)
	}
	w.windowDropTail(tail)
	if w.windowTok != 0 || w.windowTailTok != 0 || w.windowFreed != 0 || tail.slideOwn != 0 {
		t.Errorf("dropped: %d own, %d tails, %d freed, tail %d; want none", w.windowTok, w.windowTailTok, w.windowFreed, tail.slideOwn)
	}
}
