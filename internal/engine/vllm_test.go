package engine

import (
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/model"
)

// roundProfile has round step costs so that scenarios can be computed by
// hand: a step with prefill costs 10 ms + 0.1 ms per new token (+1 ms per
// decoding sequence riding along); a decode-only step 5 ms + 1 ms per
// sequence; no attention or context terms.
func roundProfile(scheduler string) *model.Profile {
	return &model.Profile{
		Name:     "round",
		Model:    model.Model{Name: "m", Layers: 1, KVHeads: 1, HeadDim: 1, DTypeBytes: 1, MaxContext: 1 << 20},
		Hardware: model.Hardware{Name: "g", HBMBytes: 1 << 30, MemFraction: 1},
		Timing: model.Timing{PrefillOverheadS: 0.010, PrefillPerTokenS: 1e-4,
			DecodeOverheadS: 0.005, DecodePerSeqS: 0.001},
		Server: &model.Server{Scheduler: scheduler},
	}
}

// times drives w to idle and returns each request's first-token and
// finish times by ID.
func times(w *Worker) (first, done map[int64]float64) {
	first, done = map[int64]float64{}, map[int64]float64{}
	_, evs := drive(w, 0)
	for _, ev := range evs {
		switch ev.Kind {
		case EvFirstToken:
			first[ev.Req.ID] = ev.Time
		case EvFinished:
			done[ev.Req.ID] = ev.Time
		}
	}
	return first, done
}

// One token budget per step, decodes first: a decoding request takes one
// token of the 100-token budget and the arriving prompt the other 99, in
// the same forward. Under SGLang's default the prompt's 100-token chunks
// run alone and the decode waits.
func TestVLLMSharesTheTokenBudget(t *testing.T) {
	for _, c := range []struct {
		sched        string
		firstB       float64
		doneA, doneB float64
	}{
		// vLLM: t1 = A's prefill 0.010 + 10·1e-4 = 0.011; then steps of
		// A's decode + 99, 99 and 52 of B's tokens: 0.0209, 0.0209,
		// 0.010 + 0.0052 + 0.001 = 0.0162 → B's first token at 0.0690;
		// A has 4 tokens; one decode step of both (0.005 + 0.002) ends
		// A (5 tokens) and B (2) at 0.0760.
		{"vllm", 0.0690, 0.0760, 0.0760},
		// SGLang: B's chunks 100, 100, 50 run alone (0.020, 0.020,
		// 0.015) → B's first token at 0.011 + 0.055 = 0.066; a decode
		// step of both (0.007) ends B at 0.073 with A at 2 tokens; three
		// steps of A alone (0.006) end it at 0.091.
		{"sglang", 0.066, 0.091, 0.073},
	} {
		w, err := New(Config{Name: "c", Profile: roundProfile(c.sched), BlockSize: 16, ChunkTokens: 100, PoolTokens: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		a := &Request{ID: 1, Kind: Full, Input: 10, Output: 5}
		w.Submit(0, a)
		w.Advance(0)
		t1, _ := w.NextTime()
		w.Advance(t1)
		w.TakeEvents()
		if !near(t1, 0.011) {
			t.Fatalf("%s: A's prefill ended at %v, want 0.011", c.sched, t1)
		}
		b := &Request{ID: 2, Kind: Full, Input: 250, Output: 2}
		w.Submit(t1, b)
		first, done := times(w)
		if !near(first[2], c.firstB) || !near(done[1], c.doneA) || !near(done[2], c.doneB) {
			t.Errorf("%s: B's first token %v, A done %v, B done %v; want %v, %v, %v", c.sched, first[2], done[1], done[2], c.firstB, c.doneA, c.doneB)
		}
	}
}

// max_num_seqs caps the running requests: the third waits until the first
// two finish, then prefills alone.
func TestVLLMMaxNumSeqs(t *testing.T) {
	w, _ := New(Config{Name: "c", Profile: roundProfile("vllm"), BlockSize: 16, ChunkTokens: 2048, MaxRunning: 2, PoolTokens: 1 << 20})
	for i := int64(1); i <= 3; i++ {
		w.Submit(0, &Request{ID: i, Kind: Full, Input: 10, Output: 3})
	}
	first, done := times(w)
	// A, B prefill together: 0.010 + 20·1e-4 = 0.012; two decode steps of
	// 0.007 end them at 0.026; C's prefill 0.011 → 0.037, then two decode
	// steps of 0.006 → 0.049.
	for id, want := range map[int64][2]float64{1: {0.012, 0.026}, 2: {0.012, 0.026}, 3: {0.037, 0.049}} {
		if !near(first[id], want[0]) || !near(done[id], want[1]) {
			t.Errorf("request %d: first token %v, done %v; want %v, %v", id, first[id], done[id], want[0], want[1])
		}
	}
}

// Prefix caching in blocks: a second prompt sharing two full 16-token
// blocks computes only its own last 8 tokens (a realrun trace gives every
// partial last block its own id, as vLLM caches full blocks only).
func TestVLLMPrefixCacheBlocks(t *testing.T) {
	w, _ := New(Config{Name: "c", Profile: roundProfile("vllm"), BlockSize: 16, ChunkTokens: 2048, PrefixCache: true, PoolTokens: 1 << 20})
	w.Submit(0, &Request{ID: 1, Kind: Full, Blocks: []uint64{1, 2, 3}, Input: 40, Output: 1})
	end, _ := drive(w, 0)
	b := &Request{ID: 2, Kind: Full, Blocks: []uint64{1, 2, 4}, Input: 40, Output: 1}
	w.Submit(end, b)
	first, _ := times(w)
	if b.CachedTokens != 32 || !near(first[2]-end, 0.010+8e-4) {
		t.Fatalf("cached %d tokens, prefill %v s; want 32 and 0.0108", b.CachedTokens, first[2]-end)
	}
}

// With decodes filling the budget, a new prompt gets what is left: three
// decoding requests and a budget of 4 leave one token per step.
func TestVLLMDecodesFirst(t *testing.T) {
	w, _ := New(Config{Name: "c", Profile: roundProfile("vllm"), BlockSize: 16, ChunkTokens: 4, PoolTokens: 1 << 20})
	for i := int64(1); i <= 3; i++ {
		w.Submit(0, &Request{ID: i, Kind: Full, Input: 1, Output: 100})
	}
	w.Advance(0)
	t1, _ := w.NextTime() // the three one-token prompts: 0.010 + 3e-4
	w.Advance(t1)
	w.TakeEvents()
	d := &Request{ID: 4, Kind: Full, Input: 3, Output: 1}
	w.Submit(t1, d)
	first, _ := times(w)
	// Three steps of 3 decodes + 1 of D's tokens: 0.010 + 1e-4 + 0.003 each.
	if want := t1 + 3*0.0131; !near(first[4], want) {
		t.Fatalf("D's first token at %v, want %v (one prompt token per step)", first[4], want)
	}
}

// Preemption by recompute: a 40-token pool admits two 10-token prompts
// (each with room for its first token only), whose decodes fill it; the
// newest is preempted, waits at the queue's front, and computes its prompt
// and its 10 generated tokens again once the other has finished.
func TestVLLMPreemptsByRecompute(t *testing.T) {
	w, err := New(Config{Name: "c", Profile: roundProfile("vllm"), BlockSize: 16, ChunkTokens: 2048, PoolTokens: 40})
	if err != nil {
		t.Fatal(err)
	}
	a := &Request{ID: 1, Kind: Full, Input: 10, Output: 20}
	b := &Request{ID: 2, Kind: Full, Input: 10, Output: 20}
	w.Submit(0, a)
	w.Submit(0, b)
	var firsts int
	first, done := map[int64]float64{}, map[int64]float64{}
	var maxUsed int64
	for w.Running() > 0 || w.Queued() > 0 {
		t1, ok := w.NextTime()
		if !ok {
			t.Fatalf("stalled at %d running, %d queued", w.Running(), w.Queued())
		}
		w.Advance(t1)
		maxUsed = max(maxUsed, w.Used())
		for _, ev := range w.TakeEvents() {
			switch ev.Kind {
			case EvFirstToken:
				firsts++
				first[ev.Req.ID] = ev.Time
			case EvFinished:
				done[ev.Req.ID] = ev.Time
			}
		}
	}
	// Both prefill in one step (0.010 + 20·1e-4 = 0.012) and hold 11 tokens
	// each; 9 decode steps of 0.007 fill the pool (40) at 0.075. B, the
	// later of the two, is preempted and A decodes alone (0.006 a step,
	// the first alone: the step that preempted admits nothing): at 0.081
	// B's 20 tokens + 1 + A's 1 do not fit in the 19 free, so A runs its
	// last 9 steps and finishes at 0.135. B then recomputes 20 tokens
	// (0.012, its 11th token at 0.147) and decodes 9 more: 0.201.
	if firsts != 2 || !near(first[1], 0.012) || !near(first[2], 0.012) {
		t.Errorf("first tokens %v (%d events), want both at 0.012, once each", first, firsts)
	}
	if !near(done[1], 0.135) || !near(done[2], 0.201) {
		t.Errorf("done A %v, B %v; want 0.135, 0.201", done[1], done[2])
	}
	if a.Generated() != 20 || b.Generated() != 20 || w.Stats().Preemptions != 1 || maxUsed > 40 {
		t.Errorf("generated %d, %d; %d preemptions; pool peak %d; want 20, 20, 1, ≤ 40", a.Generated(), b.Generated(), w.Stats().Preemptions, maxUsed)
	}
	if got := w.Stats().PrefillTokens; got != 40 {
		t.Errorf("prefill tokens %d, want 40 (20 prompt, then B's 10 + 10 again)", got)
	}
}

// Cached prefixes go before running requests: a pool holding a finished
// prompt's 16 cached tokens evicts them for the decodes first, and only
// then preempts; the preempted request still completes its output.
func TestVLLMEvictsCacheBeforePreempting(t *testing.T) {
	w, _ := New(Config{Name: "c", Profile: roundProfile("vllm"), BlockSize: 16, ChunkTokens: 2048, PrefixCache: true, PoolTokens: 40})
	w.Submit(0, &Request{ID: 9, Kind: Full, Blocks: []uint64{9}, Input: 16, Output: 1})
	end, _ := drive(w, 0)
	if w.CachedTokens() != 16 {
		t.Fatalf("cache holds %d tokens after the first prompt, want 16", w.CachedTokens())
	}
	a := &Request{ID: 1, Kind: Full, Blocks: []uint64{1}, Input: 10, Output: 20}
	b := &Request{ID: 2, Kind: Full, Blocks: []uint64{2}, Input: 10, Output: 20}
	w.Submit(end, a)
	w.Submit(end, b)
	var evictedAtPreempt int64 = -1
	for w.Running() > 0 || w.Queued() > 0 {
		t1, ok := w.NextTime()
		if !ok {
			t.Fatal("stalled")
		}
		w.Advance(t1)
		if w.Used() > 40 {
			t.Fatalf("pool over capacity: %d of 40", w.Used())
		}
		if evictedAtPreempt < 0 && w.Stats().Preemptions > 0 {
			evictedAtPreempt = w.Stats().EvictedTokens
		}
		w.TakeEvents()
	}
	if evictedAtPreempt < 16 {
		t.Errorf("%d tokens evicted when the first preemption came, want the cache's 16 first", evictedAtPreempt)
	}
	if a.Generated() != 20 || b.Generated() != 20 || a.Stage != StageDone || b.Stage != StageDone {
		t.Errorf("A %d tokens (%v), B %d (%v); want both done with 20", a.Generated(), a.Stage, b.Generated(), b.Stage)
	}
}

// Sliding-window layers in a decode step: each sequence's context counts
// up to the window. Window 100, full layers 1e-5 s and sliding layers
// 2e-5 s per token: A (50-token prompt) and B (300) prefill together
// (0.010 + 350·1e-4 = 0.045), then three decode steps j = 0..2 at
// contexts 51+j and 301+j, each 0.005 + 2·0.001 + 1e-5·(352+2j) +
// 2e-5·(min(51+j, 100) + min(301+j, 100)): 0.04074 in all, so both finish
// at 0.08574 (0.07662 without the sliding layers' reads, 0.09786 with
// them uncapped).
func TestDecodeStepCapsSlidingLayersAtTheWindow(t *testing.T) {
	p := roundProfile("vllm")
	p.Timing.DecodePerCtxTokenS, p.Timing.DecodePerWindowCtxTokenS, p.Timing.SlidingWindow = 1e-5, 2e-5, 100
	w, err := New(Config{Name: "c", Profile: p, BlockSize: 16, ChunkTokens: 2048, PoolTokens: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	w.Submit(0, &Request{ID: 1, Kind: Full, Input: 50, Output: 4})
	w.Submit(0, &Request{ID: 2, Kind: Full, Input: 300, Output: 4})
	first, done := times(w)
	for id := int64(1); id <= 2; id++ {
		if !near(first[id], 0.045) || !near(done[id], 0.08574) {
			t.Errorf("request %d: first token %v, done %v; want 0.045, 0.08574", id, first[id], done[id])
		}
	}
}
