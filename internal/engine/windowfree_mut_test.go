package engine

import "testing"

// prefillThenUsed runs one request alone on w through its prefill step and
// returns the pool tokens used then.
func prefillThenUsed(w *Worker, r *Request) int64 {
	w.Submit(0, r)
	w.Advance(0)
	t1, _ := w.NextTime()
	w.Advance(t1) // the prefill step: the prompt computed, the first token out
	return w.Used()
}

// What a vLLM worker frees after one prefill, 16-token blocks, pool tokens
// of every layer's KV:
//   - window 110: a 110-token prompt once decoding has computed 110 + 1 − 1
//     = 110 tokens, 110 − 32 + 1 = 79 skipped, 4 whole blocks (64); half of
//     them in pool tokens with one sliding layer of two: 111 − 32 = 79 used.
//   - layers 2 of 4: the 100-token prompt skips 100 − 32 + 1 = 69, 64 in
//     blocks; 64 · 2 / 4 = 32 freed, in the request's own view too: 101 −
//     32 = 69 used.
//   - no window: a sliding layer without a window frees nothing: 101 used.
//   - no sliding layer: nothing freed and nothing counted: 101 used.
func TestMutVLLMWindowFreesByHand(t *testing.T) {
	for _, c := range []struct {
		name            string
		layers, sliding int
		window          int
		input           int
		used, freed     int64
	}{
		{"window 110", 2, 1, 32, 110, 79, 32},
		{"layers 2 of 4", 4, 2, 32, 100, 69, 32},
		{"no window", 2, 1, 0, 100, 101, 0},
		{"no sliding layer", 2, 0, 32, 100, 101, 0},
	} {
		cfg := windowProfile(c.sliding)
		cfg.Profile.Model.Layers = c.layers
		cfg.Profile.Timing.SlidingWindow = c.window
		cfg.PoolTokens = 1 << 20
		w, err := New(cfg)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		r := &Request{ID: 1, Kind: Full, Input: c.input, Output: 50}
		if got := prefillThenUsed(w, r); got != c.used {
			t.Errorf("%s: %d pool tokens used after the prefill, want %d", c.name, got, c.used)
		}
		if w.windowFreedNow() != c.freed || r.windowFreed() != c.freed {
			t.Errorf("%s: %d freed (the request's view %d), want %d", c.name, w.windowFreedNow(), r.windowFreed(), c.freed)
		}
		if c.freed == 0 && (w.windowTok != 0) {
			t.Errorf("%s: %d sliding tokens; want none", c.name, w.windowTok)
		}
	}
}

// A chunked prefill over a cached prefix counts what it has computed, its
// cached tokens and its prefilled chunks. 64-token budget (hold cap 112),
// one sliding layer of two. A's 192-token prompt (blocks 1–12) is cached;
// B (326 tokens: blocks 1–12, then 9 of its own) hits 192 and prefills
// its 134 others in chunks of 64, 64, 6. At admission it frees max(192 −
// 31 = 161 → 160, (326 − 112) = 214 → 208) = 208. After its first chunk
// it has computed 192 + 64 = 256: 256 − 31 = 225 → 224, over 208: 224
// sliding tokens, 112 pool tokens freed. After its second, 320: 289 → 288,
// 144 freed.
func TestMutVLLMWindowChunkAfterACachedPrefix(t *testing.T) {
	cfg := windowAdmitProfile(1, 1<<20)
	cfg.PrefixCache = true
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.Submit(0, &Request{ID: 1, Kind: Full, Input: 192, Output: 2, Blocks: idRange(1, 12)})
	now, _ := drive(w, 0)
	b := &Request{ID: 2, Kind: Full, Input: 326, Output: 10, Blocks: seqBlocks(idRange(1, 12), idRange(101, 9))}
	w.Submit(now, b)
	for _, want := range []struct {
		prefilled int
		freed     int64
	}{{64, 112}, {128, 144}} {
		for b.prefilled < want.prefilled {
			next, ok := w.NextTime()
			if !ok {
				t.Fatal("idle before B's prefill")
			}
			w.Advance(next)
		}
		if b.Stage != StagePrefill || b.CachedTokens != 192 || b.prefilled != want.prefilled {
			t.Fatalf("B in stage %d, %d cached, %d prefilled; want prefilling, 192, %d", b.Stage, b.CachedTokens, b.prefilled, want.prefilled)
		}
		if w.windowFreedNow() != want.freed {
			t.Errorf("B prefilled %d: %d pool tokens freed, want %d", want.prefilled, w.windowFreedNow(), want.freed)
		}
	}
	// At its end B had computed 326 + 9 − 1 = 334 (its last token is
	// the run's last step): 334 − 31 = 303 → 288 skipped, 18 blocks, all
	// on its path in the cache (A's 12 and 6 of its own), and they stay
	// released when it ends: 144 pool tokens, nothing its own.
	drive(w, now)
	if w.windowFreedNow() != 144 || w.windowTok != 0 {
		t.Errorf("idle: %d freed, %d own tokens; want 144, 0", w.windowFreedNow(), w.windowTok)
	}
}

// A prompt computed again after a preemption by recompute holds from its
// admission at most windowHoldCap of its prompt and recomputed output:
// 400-token prompt, 40 output tokens to recompute, 64-token budget (hold
// cap 112): (400 + 40 − 112) = 328 → 320 skipped in 16-token blocks.
func TestMutWindowSkippedCountsTheRecompute(t *testing.T) {
	w, err := New(windowAdmitProfile(1, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	r := &Request{ID: 1, Kind: Full, Input: 400, Output: 100, Stage: StagePrefill, recompute: 40}
	if got := w.windowSkippedNow(r); got != 320 {
		t.Errorf("%d skipped, want 320", got)
	}
}

// windowPeak of 100 prompt and 50 output tokens: 150 on a worker that
// frees nothing (SGLang); on vLLM with a 64-token budget (hold cap 112,
// 16-token blocks) 150 less the sliding half of max(150 − 112 − 32, 0) =
// 6 tokens, 3: 147. (Admission asks it with no output tokens: vLLM
// allocates them as it decodes.)
func TestMutWindowPeakCountsTheOutput(t *testing.T) {
	for _, c := range []struct {
		scheduler string
		peak      int64
	}{{"sglang", 150}, {"vllm", 147}} {
		cfg := windowAdmitProfile(1, 1<<20)
		cfg.Profile.Server.Scheduler = c.scheduler
		w, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := w.windowPeak(100, 50); got != c.peak {
			t.Errorf("%s: peak %d, want %d", c.scheduler, got, c.peak)
		}
	}
}
