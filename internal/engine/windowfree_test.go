package engine

import "testing"

// windowProfile is roundProfile under vLLM with two layers, one of them
// sliding over a 32-token window (no context terms, so that the step
// times stay round).
func windowProfile(sliding int) Config {
	p := roundProfile("vllm")
	p.Model.Layers, p.Model.SlidingLayers = 2, sliding
	p.Timing.SlidingWindow = 32
	return Config{Name: "c", Profile: p, BlockSize: 16, ChunkTokens: 2048}
}

// A 100-token prompt with 16-token blocks and a 32-token window: once its
// prefill computed 100 tokens, vLLM's get_num_skipped_tokens is
// 100 − 32 + 1 = 69, four whole blocks (64 tokens) of the sliding layer
// are freed. In blocks: the full layer holds ceil(101/16) = 7, the sliding
// layer 7 − 4 = 3. In the pool's tokens of both layers' KV the request
// holds its 101 tokens less half of the 64, 69 (the engine does not charge
// a partly filled last block). Without the sliding layer, 101.
func TestVLLMWindowFreesBlocksBehindTheWindow(t *testing.T) {
	for _, c := range []struct {
		sliding int
		used    int64
	}{{1, 69}, {0, 101}} {
		cfg := windowProfile(c.sliding)
		cfg.PoolTokens = 1 << 20
		w, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		w.Submit(0, &Request{ID: 1, Kind: Full, Input: 100, Output: 50})
		w.Advance(0)
		t1, _ := w.NextTime()
		w.Advance(t1) // the prefill step: 100 tokens computed, the first token out
		if got := w.Used(); got != c.used {
			t.Errorf("sliding layers %d: %d pool tokens used after the prefill, want %d", c.sliding, got, c.used)
		}
		drive(w, t1)
		if w.Used() != 0 || w.windowFreedNow() != 0 {
			t.Errorf("sliding layers %d: %d used, %d freed after the request ended, want 0, 0", c.sliding, w.Used(), w.windowFreedNow())
		}
	}
}

// More requests fit: two 100-token prompts with 60 output tokens each in a
// 260-token pool. Both are admitted (101 + 101 = 202) and prefill in one
// step (0.010 + 200·1e-4 = 0.030). With the sliding layer's blocks freed
// (32 pool tokens each) 260 − 138 = 122 tokens are free, room for all 59
// remaining decode steps of both (118): they run in one go, 0.007 each,
// and both end at 0.030 + 59·0.007 = 0.443 with no preemption. Without
// the freeing 58 tokens are free: 29 steps, then the newer is preempted.
func TestVLLMWindowFreeingAvoidsPreemption(t *testing.T) {
	for _, c := range []struct {
		sliding     int
		preemptions int64
	}{{1, 0}, {0, 1}} {
		cfg := windowProfile(c.sliding)
		cfg.PoolTokens = 260
		w, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		w.Submit(0, &Request{ID: 1, Kind: Full, Input: 100, Output: 60})
		w.Submit(0, &Request{ID: 2, Kind: Full, Input: 100, Output: 60})
		_, done := times(w)
		if got := w.Stats().Preemptions; (got == 0) != (c.preemptions == 0) {
			t.Errorf("sliding layers %d: %d preemptions, want %d", c.sliding, got, c.preemptions)
		}
		if c.sliding == 1 && (!near(done[1], 0.443) || !near(done[2], 0.443)) {
			t.Errorf("both should end at 0.443 with the freeing: %v, %v", done[1], done[2])
		}
	}
}

// SGLang keeps the sliding layers' KV in its own pool (or in the one pool
// of every layer): this freeing is vLLM's, and an SGLang worker with the
// same model holds the whole 101 tokens.
func TestWindowFreeingIsVLLMs(t *testing.T) {
	cfg := windowProfile(1)
	cfg.Profile.Server.Scheduler = "sglang"
	cfg.PoolTokens = 1 << 20
	w, _ := New(cfg)
	w.Submit(0, &Request{ID: 1, Kind: Full, Input: 100, Output: 50})
	w.Advance(0)
	t1, _ := w.NextTime()
	w.Advance(t1)
	if got := w.Used() + w.Reserved(); got != 150 {
		t.Errorf("SGLang: %d used + reserved, want 150 (prompt, output)", got)
	}
}

// With the prefix cache, a prompt stays cached after its request, and the
// sliding blocks its window passed stay freed (vLLM freed them while it
// ran; they are reused only when the pool needs them). 300-token pool: A
// (200-token prompt, 40 output tokens) holds 201 − 80 = 121 after its
// prefill (skipped 169 → 160 in blocks, half of them freed); B (150, 10)
// then fits (152 of 179 free), passes 150 − 31 = 119 → 112 tokens (7
// blocks), ends first and leaves its prompt cached. A's window had passed
// 11 blocks (176 tokens) at its last step boundary. Idle, the two cached
// prompts hold 350 − (176 + 112) / 2 = 206 tokens, and nothing is evicted.
// Before, the freed tokens were given back to the cached prompts when
// their requests ended: 350 tokens in the 300-token pool, so the cache
// gave one up.
func TestVLLMWindowFreeingWithPrefixCache(t *testing.T) {
	cfg := windowProfile(1)
	cfg.PoolTokens = 300
	cfg.PrefixCache = true
	w, _ := New(cfg)
	blocks := func(from uint64, n int) []uint64 {
		b := make([]uint64, n)
		for i := range b {
			b[i] = from + uint64(i)
		}
		return b
	}
	w.Submit(0, &Request{ID: 1, Kind: Full, Input: 200, Output: 40, Blocks: blocks(1, 13)})
	w.Advance(0)
	t1, _ := w.NextTime()
	w.Advance(t1)
	if w.Used() != 121 {
		t.Fatalf("A after its prefill: %d used, want 121", w.Used())
	}
	w.Submit(t1, &Request{ID: 2, Kind: Full, Input: 150, Output: 10, Blocks: blocks(100, 10)})
	now, over := t1, false
	for {
		if w.Used()+w.Reserved() > w.Capacity() {
			over = true
			t.Errorf("at %v: %d used + %d reserved over the %d-token pool", now, w.Used(), w.Reserved(), w.Capacity())
		}
		next, ok := w.NextTime()
		if !ok || over {
			break
		}
		now = next
		w.Advance(now)
		w.TakeEvents()
	}
	if w.windowFreedNow() != 144 || w.Used() != 206 || w.CachedTokens() != 206 || w.Stats().EvictedTokens != 0 {
		t.Errorf("idle: %d freed, %d used, %d cached, %d evicted; want 144, 206, 206, 0",
			w.windowFreedNow(), w.Used(), w.CachedTokens(), w.Stats().EvictedTokens)
	}
}
