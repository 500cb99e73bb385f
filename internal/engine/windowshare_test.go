package engine

import "testing"

func seqBlocks(ids ...[]uint64) []uint64 {
	var out []uint64
	for _, s := range ids {
		out = append(out, s...)
	}
	return out
}

func idRange(from uint64, n int) []uint64 {
	b := make([]uint64, n)
	for i := range b {
		b[i] = from + uint64(i)
	}
	return b
}

// Two running requests that share a cached prefix free its sliding part
// once. A (192 tokens, blocks 1–12) runs and leaves its prompt cached.
// B and C (256 tokens each: blocks 1–12, then four of their own) hit its
// 192 tokens and prefill their other 64 together; each has then computed
// 256 tokens (at 0.0352 + 0.010 + 128 · 1e-4 = 0.0580), 256 − 32 + 1 = 225 skipped, 14 whole blocks: the 12 shared
// and 2 of its own. Distinct, 12 + 2 + 2 = 16 blocks, 256 sliding tokens,
// 128 pool tokens with one sliding layer of two; counted per request it
// was 2 · 224 / 2 = 224, the shared 192 tokens' sliding part twice.
func TestVLLMWindowFreesASharedPrefixOnce(t *testing.T) {
	cfg := windowProfile(1)
	cfg.PoolTokens = 1 << 20
	cfg.PrefixCache = true
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.Submit(0, &Request{ID: 1, Kind: Full, Input: 192, Output: 2, Blocks: idRange(1, 12)})
	now, _ := drive(w, 0)
	b := &Request{ID: 2, Kind: Full, Input: 256, Output: 10, Blocks: seqBlocks(idRange(1, 12), idRange(101, 4))}
	c := &Request{ID: 3, Kind: Full, Input: 256, Output: 10, Blocks: seqBlocks(idRange(1, 12), idRange(201, 4))}
	w.Submit(now, b)
	w.Submit(now, c)
	t1, _ := w.NextTime()
	w.Advance(t1) // the step boundary they arrive at (A ended there)
	t1, _ = w.NextTime()
	if !near(t1, 0.0352+0.010+128*1e-4) {
		t.Fatalf("B's and C's prefill ends at %v, want 0.0580", t1)
	}
	w.Advance(t1) // their prefill: 256 computed each
	if b.CachedTokens != 192 || c.CachedTokens != 192 {
		t.Fatalf("cached %d, %d; want 192 each", b.CachedTokens, c.CachedTokens)
	}
	if w.windowFreedNow() != 128 {
		t.Errorf("%d pool tokens freed, want 128 (16 distinct blocks' sliding half)", w.windowFreedNow())
	}
	if b.windowFreed() != 112 || c.windowFreed() != 112 {
		t.Errorf("each request's own view %d, %d; want 224 / 2 = 112", b.windowFreed(), c.windowFreed())
	}
	// Their decode runs to the end in one run (ten steps), so the blocks
	// behind their windows are those of the prefill step, and they stay
	// released when the requests end (vLLM freed them while they ran):
	// the 16 distinct blocks, 128 pool tokens, none a request's own.
	drive(w, t1)
	if w.windowFreedNow() != 128 || w.windowTok != 0 {
		t.Errorf("idle: %d freed, %d tokens; want 128, 0", w.windowFreedNow(), w.windowTok)
	}
}

// Without a prefix cache nothing is shared: the same block ids in two
// requests are two copies, each freed.
func TestWindowSharesOnlyCachedBlocks(t *testing.T) {
	cfg := windowProfile(1)
	cfg.PoolTokens = 1 << 20
	w, _ := New(cfg)
	for id := int64(1); id <= 2; id++ {
		w.Submit(0, &Request{ID: id, Kind: Full, Input: 256, Output: 10, Blocks: idRange(1, 16)})
	}
	w.Advance(0)
	t1, _ := w.NextTime()
	w.Advance(t1) // both prefills: 256 computed each, 14 blocks skipped
	if w.windowFreedNow() != 224 {
		t.Errorf("%d pool tokens freed, want 2 · 224 / 2 = 224", w.windowFreedNow())
	}
}

// The owner may reuse a request's block storage once its prefill is done
// (Request.Blocks): the freed count is kept on the cache's nodes, so
// overwriting the ids then changes nothing.
func TestWindowKeysSurviveBlockReuse(t *testing.T) {
	cfg := windowProfile(1)
	cfg.PoolTokens = 1 << 20
	cfg.PrefixCache = true
	w, _ := New(cfg)
	rs := []*Request{
		{ID: 1, Kind: Full, Input: 256, Output: 200, Blocks: seqBlocks(idRange(1, 12), idRange(101, 4))},
		{ID: 2, Kind: Full, Input: 256, Output: 200, Blocks: seqBlocks(idRange(1, 12), idRange(201, 4))},
	}
	for _, r := range rs {
		w.Submit(0, r)
	}
	w.Advance(0)
	t1, _ := w.NextTime()
	w.Advance(t1) // both prefills: the shared 12 blocks are computed by both here, no cache hit
	for _, r := range rs {
		for i := range r.Blocks {
			r.Blocks[i] = 9999 // reused storage
		}
	}
	// What their prefill step passed (12 shared blocks and 2 of each
	// one's own: 256 sliding tokens, 128 pool tokens) stays released on
	// the cache's nodes, whatever the request's ids now say.
	drive(w, t1)
	if w.windowFreedNow() != 128 || w.windowTok != 0 {
		t.Errorf("idle: %d freed, %d tokens; want 128, 0", w.windowFreedNow(), w.windowTok)
	}
}

// Admission counts only the freed blocks no running request counts yet.
// 460-token pool, one sliding layer of two, 64-token budget (hold cap
// 112): A's 192-token prompt (blocks 1–12) is cached; B and C (512 tokens:
// blocks 1–12, then 20 of their own; 100 output tokens) arrive together.
// B prefills its 320 uncached tokens in five 64-token steps; with its first
// token (0.1372) it has 480 tokens (30 blocks) behind its window: 240 pool
// tokens freed, 512 cached + 1 own − 240 = 273 used, 187 free. C's
// admission would free max(160, ⌊(512 − 112) / 16⌋ · 16) = 400 tokens, 25
// blocks, but the 12 shared ones B counts already: 13 new, 104 pool
// tokens, so C needs 320 + 1 − 104 (+ 1 for B's next token) = 218 > 187 and
// waits for B to end (0.7312). Counting its 25 blocks as new (200) it would
// need 122 and start at once.
func TestVLLMWindowAdmitCreditCountsSharedBlocksOnce(t *testing.T) {
	cfg := windowAdmitProfile(1, 460)
	cfg.PrefixCache = true
	w, _ := New(cfg)
	w.Submit(0, &Request{ID: 1, Kind: Full, Input: 192, Output: 2, Blocks: idRange(1, 12)})
	now, _ := drive(w, 0)
	b := &Request{ID: 2, Kind: Full, Input: 512, Output: 100, Blocks: seqBlocks(idRange(1, 12), idRange(101, 20))}
	c := &Request{ID: 3, Kind: Full, Input: 512, Output: 100, Blocks: seqBlocks(idRange(1, 12), idRange(201, 20))}
	w.Submit(now, b)
	w.Submit(now, c)
	drive(w, now)
	if !near(b.FirstTokenAt, 0.1372) || !near(b.FinishedAt, 0.7312) || !near(c.AdmittedAt, 0.7312) {
		t.Errorf("B first token %v, done %v; C admitted %v; want 0.1372, 0.7312, 0.7312", b.FirstTokenAt, b.FinishedAt, c.AdmittedAt)
	}
	if w.windowTok != 0 || w.Used() != w.tree.Tokens()-w.windowFreedNow() {
		t.Errorf("idle: %d own tokens, %d used; want 0, the cache's %d less %d freed", w.windowTok, w.Used(), w.tree.Tokens(), w.windowFreedNow())
	}
	if err := w.tree.Check(); err != nil {
		t.Error(err)
	}
}
