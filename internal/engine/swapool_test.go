package engine

import (
	"math/rand"
	"testing"
)

// swaConfig is roundProfile under SGLang with two layers, one sliding over
// 32 tokens, and a sliding pool of ratio tokens per pool token.
func swaConfig(ratio float64, pool int64) Config {
	p := roundProfile("sglang")
	p.Model.Layers, p.Model.SlidingLayers, p.Model.SWAPoolRatio = 2, 1, ratio
	p.Timing.SlidingWindow = 32
	return Config{Name: "s", Profile: p, BlockSize: 16, ChunkTokens: 2048, PoolTokens: pool}
}

// Two 300-token prompts (10 output tokens each) in a 1,000-token pool
// whose sliding pool holds 0.5 of it, 500 tokens. Each needs its window
// (min(310, 32) = 32) and its 300-token chunk: 332. A is admitted; B's 332
// beside A's 332 is over 500, so B waits for A's prefill (0.010 + 300 ·
// 1e-4 = 0.040), after which A holds its window alone (32 + 332 = 364 ≤
// 500) and B prefills next: its first token at 0.080. Without the sliding
// pool both prefill in one step and get their first tokens at 0.070.
func TestSGLangSWAPoolGatesAdmission(t *testing.T) {
	for _, c := range []struct {
		ratio          float64
		firstA, firstB float64
		cap            int64
	}{{0.5, 0.040, 0.080, 500}, {0, 0.070, 0.070, 0}} {
		w, err := New(swaConfig(c.ratio, 1000))
		if err != nil {
			t.Fatal(err)
		}
		if w.SWACapacity() != c.cap {
			t.Fatalf("ratio %v: sliding pool %d tokens, want %d", c.ratio, w.SWACapacity(), c.cap)
		}
		w.Submit(0, &Request{ID: 1, Kind: Full, Input: 300, Output: 10})
		w.Submit(0, &Request{ID: 2, Kind: Full, Input: 300, Output: 10})
		first, _ := times(w)
		if !near(first[1], c.firstA) || !near(first[2], c.firstB) {
			t.Errorf("ratio %v: first tokens %v, %v; want %v, %v", c.ratio, first[1], first[2], c.firstA, c.firstB)
		}
		if w.SWAUsed() != 0 {
			t.Errorf("ratio %v: %d sliding tokens held when idle, want 0", c.ratio, w.SWAUsed())
		}
	}
}

// The holds step by step: A's 332 at its admission; after its prefill
// step its window (32) beside B's 332; after B's, both windows, 64.
func TestSGLangSWAPoolHolds(t *testing.T) {
	w, _ := New(swaConfig(0.5, 1000))
	w.Submit(0, &Request{ID: 1, Kind: Full, Input: 300, Output: 10})
	w.Submit(0, &Request{ID: 2, Kind: Full, Input: 300, Output: 10})
	w.Advance(0)
	for i, want := range []int64{332, 364, 64} {
		if i > 0 {
			next, _ := w.NextTime()
			w.Advance(next)
		}
		if got := w.SWAUsed(); got != want {
			t.Errorf("step %d: %d sliding tokens held, want %d", i, got, want)
		}
	}
}

// A decoder's reservations hold their windows alone: with 50 sliding
// slots (0.05 of 1,000) and a 32-token window, a second 100-token
// reservation waits until the first request ends, though the full pool
// has room for both (210 of 1,000).
func TestSGLangSWAPoolGatesReservations(t *testing.T) {
	w, _ := New(swaConfig(0.05, 1000))
	a := &Request{ID: 1, Kind: DecodeOnly, Input: 100, Output: 5}
	b := &Request{ID: 2, Kind: DecodeOnly, Input: 100, Output: 5}
	w.Reserve(0, a)
	w.Reserve(0, b)
	if a.Stage != StageReserved || b.Stage != StageWaiting || w.SWAUsed() != 32 {
		t.Fatalf("stages %d, %d, %d sliding tokens held; want a reserved, b waiting, 32", a.Stage, b.Stage, w.SWAUsed())
	}
	w.StartDecode(0, a)
	drive(w, 0)
	if b.Stage != StageReserved || w.SWAUsed() != 32 {
		t.Errorf("after a ended: b in stage %d, %d sliding tokens held; want reserved, 32", b.Stage, w.SWAUsed())
	}
}

// vLLM keeps one block pool for every layer: no sliding pool there.
func TestSWAPoolIsSGLangs(t *testing.T) {
	cfg := swaConfig(0.5, 1000)
	cfg.Profile.Server.Scheduler = "vllm"
	if w, _ := New(cfg); w.SWACapacity() != 0 {
		t.Errorf("vLLM worker with a sliding pool of %d tokens, want none", w.SWACapacity())
	}
}

// Property: with arrivals of every size, prefix-cache hits and a sliding
// pool from tiny to ample, the held sliding tokens never pass the pool,
// every request finishes (one the pool cannot hold alone runs with what it
// has), and nothing is held once the worker is idle.
func TestSWAPoolNeverOvercommits(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for _, ratio := range []float64{0.01, 0.05, 0.3, 1} {
		cfg := swaConfig(ratio, 20000)
		cfg.PrefixCache, cfg.ChunkTokens = true, 512
		w, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		now, n := 0.0, 60
		done := 0
		for i := 0; i < n; i++ {
			in := 1 + rng.Intn(1500)
			blocks := make([]uint64, (in+15)/16)
			for j := range blocks {
				blocks[j] = uint64(rng.Intn(3)*1000 + j) // three shared prefixes
			}
			w.Submit(now, &Request{ID: int64(i), Kind: Full, Input: in, Output: 1 + rng.Intn(40), Blocks: blocks})
			for k := 0; k < 3; k++ {
				next, ok := w.NextTime()
				if !ok {
					break
				}
				now = next
				w.Advance(now)
				for _, ev := range w.TakeEvents() {
					if ev.Kind == EvFinished {
						done++
					}
				}
				if w.SWAUsed() > w.SWACapacity() || w.SWAUsed() < 0 {
					t.Fatalf("ratio %v at %v: %d sliding tokens held of %d", ratio, now, w.SWAUsed(), w.SWACapacity())
				}
				if err := w.tree.Check(); err != nil {
					t.Fatalf("ratio %v at %v: %v", ratio, now, err)
				}
			}
		}
		_, evs := drive(w, now)
		for _, ev := range evs {
			if ev.Kind == EvFinished {
				done++
			}
		}
		if done != n || w.SWAUsed() != 0 {
			t.Errorf("ratio %v: %d of %d finished, %d sliding tokens held when idle", ratio, done, n, w.SWAUsed())
		}
	}
}

// With a prefix cache the cached tokens hold sliding slots, and when the
// sliding pool is short the least recently released are tombstoned: a
// match then ends where a window of untombstoned tokens precedes it
// (SGLang's _match_prefix_helper). Window 32, 16-token blocks,
// 1,000-token pool. A (256 tokens, blocks 1–16, 2 output tokens) ends
// cached; its prefill passed all but its last 2 blocks (its window), so
// the cache holds nodes [0, 14) (released at its prefill) and [14, 16)
// (released at its end). B (300 tokens of its own) needs 32 + 300 = 332
// slots: with a 500-slot pool (ratio 0.5) the cache's 256 leave 244, so
// the least recently released, A's first 14 blocks (224 tokens), are
// tombstoned (32 + 332 = 364 ≤ 500). C (A's first 8 blocks and 4 of its
// own) then matches inside the tombstone: nothing cached (128 at ratio
// 1, where nothing is tombstoned). C needs 32 + 192 = 224 slots beside
// the cache's 32 + 300 = 332 untombstoned: A's last 2 blocks (released
// at A's end) and B's first 17 (released at B's prefill, 272 tokens) go
// (28 + 224 ≤ 500), and C computes A's first 8 blocks again, which holds
// them anew. D (A's 16 blocks and 4 of its own) then matches those 8
// and the tombstones after them: 128 cached, 256 at ratio 1.
func TestSGLangSWATombstoneCutsTheMatch(t *testing.T) {
	for _, c := range []struct {
		ratio            float64
		gone, hitC, hitD int64
	}{{0.5, 224, 0, 128}, {1, 0, 128, 256}} {
		cfg := swaConfig(c.ratio, 1000)
		cfg.PrefixCache = true
		w, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		w.Submit(0, &Request{ID: 1, Kind: Full, Input: 256, Output: 2, Blocks: idRange(1, 16)})
		now, _ := drive(w, 0)
		w.Submit(now, &Request{ID: 2, Kind: Full, Input: 300, Output: 2, Blocks: idRange(1001, 19)})
		now, _ = drive(w, now)
		if got := w.tree.GoneTokens(); got != c.gone {
			t.Errorf("ratio %v: %d tokens tombstoned, want %d", c.ratio, got, c.gone)
		}
		cr := &Request{ID: 3, Kind: Full, Input: 192, Output: 2, Blocks: seqBlocks(idRange(1, 8), idRange(301, 4))}
		w.Submit(now, cr)
		now, _ = drive(w, now)
		d := &Request{ID: 4, Kind: Full, Input: 320, Output: 2, Blocks: seqBlocks(idRange(1, 16), idRange(401, 4))}
		w.Submit(now, d)
		drive(w, now)
		if int64(cr.CachedTokens) != c.hitC || int64(d.CachedTokens) != c.hitD {
			t.Errorf("ratio %v: C cached %d, D %d; want %d, %d", c.ratio, cr.CachedTokens, d.CachedTokens, c.hitC, c.hitD)
		}
		if err := w.tree.Check(); err != nil {
			t.Error(err)
		}
		if w.SWAUsed() != 0 {
			t.Errorf("ratio %v: %d sliding tokens held when idle", c.ratio, w.SWAUsed())
		}
	}
}
