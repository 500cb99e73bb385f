package engine

import (
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
	"github.com/pdhybrid/pdhybrid/internal/model"
)

// More of schedule.go's survivors (see schedule_mut_test.go), each figure
// by hand from roundProfile's step costs.

// A prompt with no block ids on a prefix-cache worker is not filed in the
// cache: after its prefill step its 100 prompt tokens and its first token
// are its own (101 used, none cached), and they all go back at its end.
func TestNoBlockPromptStaysOwn(t *testing.T) {
	w, err := New(Config{Name: "c", Profile: roundProfile("sglang"), BlockSize: 16, ChunkTokens: 1000, PoolTokens: 1 << 20, PrefixCache: true})
	if err != nil {
		t.Fatal(err)
	}
	r := &Request{ID: 1, Kind: Full, Input: 100, Output: 3}
	w.Submit(0, r)
	w.Advance(0)
	t1, _ := w.NextTime()
	w.Advance(t1)
	if w.Used() != 101 || w.CachedTokens() != 0 || r.own != 101 {
		t.Fatalf("after the prefill: used %d, cached %d, own %d; want 101, 0, 101", w.Used(), w.CachedTokens(), r.own)
	}
	drive(w, t1)
	checkPool(t, w)
	if w.Used() != 0 {
		t.Fatalf("after the end: used %d, want 0", w.Used())
	}
}

// A trim run by the scheduler at t = 1 stalls the step it planned: the
// pool of 1,000 holds session s (512, pinned); a plain prompt of 600 needs
// 601 > 488 free, so s is trimmed (0.5 s of stall) and the prefill step
// starts at 1.5: its first token at 1.5 + 0.010 + 600·1e-4 = 1.57.
func TestSchedulerTrimStallsTheStepAtItsTime(t *testing.T) {
	w := coloSessions(t, 1000, SessionConfig{TrimStallS: 0.5})
	fullOn(t, w, 0, 1, "s", chain(1, 8), 512, 1)
	r := &Request{ID: 2, Kind: Full, Blocks: chain(2, 10), Input: 600, Output: 1}
	if err := w.Submit(1, r); err != nil {
		t.Fatal(err)
	}
	drive(w, 1)
	if w.Stats().SessionEvictions != 1 || !near(r.FirstTokenAt, 1.57) {
		t.Fatalf("%d sessions evicted, first token at %v; want 1, 1.57", w.Stats().SessionEvictions, r.FirstTokenAt)
	}
}

// With mixed chunks a prefill step with nothing decoding is no decode
// step: a prompt with 3 output tokens has its first from the prefill and
// the other two from 2 decode steps.
func TestMixedPrefillAloneIsNoDecodeStep(t *testing.T) {
	w, err := New(Config{Name: "c", Profile: roundProfile("sglang"), BlockSize: 16, ChunkTokens: 1000, PoolTokens: 1 << 20, MixedChunk: true})
	if err != nil {
		t.Fatal(err)
	}
	w.Submit(0, &Request{ID: 1, Kind: Full, Input: 10, Output: 3})
	drive(w, 0)
	if s := w.Stats(); s.DecodeSteps != 2 || s.PrefillSteps != 1 {
		t.Fatalf("%d decode steps, %d prefill steps; want 2, 1", s.DecodeSteps, s.PrefillSteps)
	}
}

// A decoding request riding in a mixed step has the step's whole duration
// as its gap. A (10 tokens, 4 out) prefills to 0.011; B (100 tokens)
// arrives then, and the mixed step is 0.010 + 100·1e-4 + 0.001 (A riding)
// = 0.021 s; A's two last tokens are decode steps of 0.006. A's gaps:
// 0.021, 0.006, 0.006.
func TestMixedStepGapIsTheStep(t *testing.T) {
	h := metrics.NewGapHistogram()
	w, err := New(Config{Name: "c", Profile: roundProfile("sglang"), BlockSize: 16, ChunkTokens: 1000, PoolTokens: 1 << 20,
		MixedChunk: true, Gaps: h})
	if err != nil {
		t.Fatal(err)
	}
	a := &Request{ID: 1, Kind: Full, Input: 10, Output: 4}
	w.Submit(0, a)
	w.Advance(0)
	t1, _ := w.NextTime()
	w.Advance(t1)
	w.Submit(t1, &Request{ID: 2, Kind: Full, Input: 100, Output: 1})
	drive(w, t1)
	if h.Count() != 3 || rel(h.Max(), 0.021) > 0.01 || rel(h.Min(), 0.006) > 0.01 {
		t.Fatalf("%d gaps, %v to %v; want 3 from 0.006 to 0.021", h.Count(), h.Min(), h.Max())
	}
}

// A mixed step pays the riding batch's sliding-window reads and attention
// tail. Window: A (10 tokens) decodes at context 11, capped at a window of
// 8: 8 · 1e-4 s; the step with B's 100 tokens is 0.010 + 0.010 + 0.001 +
// 0.0008 = 0.0218 after A's prefill at 0.011 → B's first token at 0.0328.
// Tail: three prompts of 100, 100, 300 prefill together (0.060) and ride
// at contexts 101, 101, 301 in B's step (10 tokens): 0.010 + 0.001 +
// 3·0.001 + 503 · 1 µs + the tile tail 301 µs (attntail_test.go) =
// 0.014804 → 0.074804.
func TestMixedStepPaysWindowAndTail(t *testing.T) {
	p := roundProfile("sglang")
	p.Timing.DecodePerWindowCtxTokenS, p.Timing.SlidingWindow = 1e-4, 8
	w, err := New(Config{Name: "c", Profile: p, BlockSize: 16, ChunkTokens: 1000, PoolTokens: 1 << 20, MixedChunk: true})
	if err != nil {
		t.Fatal(err)
	}
	w.Submit(0, &Request{ID: 1, Kind: Full, Input: 10, Output: 4})
	w.Advance(0)
	t1, _ := w.NextTime()
	w.Advance(t1)
	b := &Request{ID: 2, Kind: Full, Input: 100, Output: 1}
	w.Submit(t1, b)
	drive(w, t1)
	if !near(t1, 0.011) || !near(b.FirstTokenAt, 0.0328) {
		t.Errorf("window: A's prefill to %v, B's first token %v; want 0.011, 0.0328", t1, b.FirstTokenAt)
	}

	p = roundProfile("sglang")
	p.Timing.DecodePerCtxTokenS = 1e-6
	p.Timing.AttnTiles = &model.AttnTiles{KVHeads: 1, SMs: 2, BlockN: 128, MaxSplits: 1, CTAShare: 0.5}
	w, err = New(Config{Name: "c", Profile: p, BlockSize: 16, ChunkTokens: 2048, PoolTokens: 1 << 20, MixedChunk: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range []int{100, 100, 300} {
		w.Submit(0, &Request{ID: int64(i + 1), Kind: Full, Input: n, Output: 3})
	}
	w.Advance(0)
	t1, _ = w.NextTime()
	w.Advance(t1)
	b = &Request{ID: 9, Kind: Full, Input: 10, Output: 1}
	w.Submit(t1, b)
	drive(w, t1)
	if !near(t1, 0.060) || !near(b.FirstTokenAt, 0.074804) {
		t.Errorf("tail: prefill to %v, B's first token %v; want 0.060, 0.074804", t1, b.FirstTokenAt)
	}
}

// vLLM admits a waiting prompt only with room for this step's decode
// tokens too: A (10 tokens, 20 out) holds 11 of 40 after its prefill
// (0.011); B's 28 + 1 fit the 29 free only without A's next token, so B
// waits for A's end: 19 decode steps of 0.006 → 0.125; B's prefill then
// ends at 0.125 + 0.010 + 28·1e-4 = 0.1378.
func TestVLLMAdmissionLeavesRoomForDecodes(t *testing.T) {
	w, err := New(Config{Name: "c", Profile: roundProfile("vllm"), BlockSize: 16, ChunkTokens: 2048, PoolTokens: 40})
	if err != nil {
		t.Fatal(err)
	}
	a := &Request{ID: 1, Kind: Full, Input: 10, Output: 20}
	w.Submit(0, a)
	w.Advance(0)
	t1, _ := w.NextTime()
	w.Advance(t1)
	if w.Used() != 11 {
		t.Fatalf("A holds %d after its prefill, want 11", w.Used())
	}
	b := &Request{ID: 2, Kind: Full, Input: 28, Output: 1}
	w.Submit(t1, b)
	_, done := times(w)
	if !near(done[1], 0.125) || !near(b.AdmittedAt, 0.125) || !near(b.FirstTokenAt, 0.1378) {
		t.Fatalf("A done %v; B admitted %v, first token %v; want 0.125, 0.125, 0.1378", done[1], b.AdmittedAt, b.FirstTokenAt)
	}
}

// A host load is charged once, in the step of the request's first chunk:
// the demoted-turn scenario of TestHiCacheDemotedTurnLoadsBack with chunks
// of 512, so the 1,024 tokens computed take two steps; one load of 2,048.
func TestHiCacheLoadChargedOncePerRequest(t *testing.T) {
	w, err := New(Config{Name: "w", Profile: testProfile(t), BlockSize: 16, PoolTokens: 4096, ChunkTokens: 512,
		PrefixCache: true, HiCache: HiCacheConfig{Enabled: true, Ratio: 4, WritePolicy: WriteThrough}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := chain(1, 192), chain(2, 188)
	_, now := turn(t, w, 0, 1, "a", a[:128], 2048, 1)
	_, now = turn(t, w, now+1, 2, "b", b, 3000, 1)
	loads := w.Stats().HostLoads
	r, _ := turn(t, w, now+1, 3, "a", a, 3072, 1)
	if s := w.Stats(); r.CachedTokens != 2048 || s.HostLoads-loads != 1 || r.loadPending {
		t.Fatalf("cached %d, %d loads, pending %v; want 2048, 1, false", r.CachedTokens, s.HostLoads-loads, r.loadPending)
	}
}

// A sliced chunk that continues a prompt is sized at the context it starts
// from. sliceWorker's costs with attention: 10 µs a token plus 1 ns a token
// per context token. a (1,001 out) has budgets far past the step cap, 16 ·
// 12 ms = 192 ms, so every step of b's prompt may do 0.192 − 0.010 = 0.182 s
// of work: the largest m with 1e-5·m + 1e-9·m·(p + m/2) ≤ 0.182 is 11,540
// at p = 0 (the root 11,540.66) and 7,234 at p = 11,540 (7,234.50).
func TestSliceChunkAtItsContext(t *testing.T) {
	p := *testProfile(t)
	p.Timing = model.Timing{PrefillOverheadS: 0.010, PrefillPerTokenS: 1e-5, PrefillAttnS: 1e-9, DecodeOverheadS: 0.002}
	w, err := New(Config{Name: "c", Profile: &p, BlockSize: 64, PoolTokens: 1 << 20, ChunkTokens: 1 << 20,
		PrefixCache: true, MixedChunk: true, SliceTPOTS: 0.012})
	if err != nil {
		t.Fatal(err)
	}
	a := &Request{ID: 1, Kind: Full, Blocks: []uint64{1, 2}, Input: 100, Output: 1001}
	w.Submit(0, a)
	w.Advance(0)
	t0, _ := w.NextTime()
	w.Advance(t0)
	b := &Request{ID: 2, Kind: Full, Blocks: []uint64{3}, Input: 200000, Output: 1}
	w.Submit(t0, b)
	var got []int
	for range 2 {
		if len(w.plan.chunks) != 1 || w.plan.chunks[0].req != b {
			t.Fatalf("plan %+v, want one chunk of b", w.plan.chunks)
		}
		got = append(got, w.plan.chunks[0].n)
		t1, _ := w.NextTime()
		w.Advance(t1)
	}
	if got[0] != 11540 || got[1] != 7234 {
		t.Fatalf("b's chunks %v, want 11540 then 7234", got)
	}
}

// A decode run that slicing chose waits out a trim's stall like any step.
// sliceWorker's costs, a TPOT bound of 2 ms (the decode step itself): a
// (100 tokens, 11 out) has a budget of 0.002·10 − 0 − 10·0.002 = 0 at its
// first token, so no chunk fits and the worker decodes its 10 tokens
// (0.020 s). s (256) prefills first: 0.010 + 256·1e-5 = 0.01256; a's
// prefill 0.011 → t0 = 0.02356. An admission at t0 needing 700 of the 633
// free trims s (0.5 s of stall); c, queued then, makes the worker plan
// again: the run starts at t0 + 0.5 and ends a at t0 + 0.52 = 0.54356.
func TestSlicedDecodeRunWaitsOutTheStall(t *testing.T) {
	p := *testProfile(t)
	p.Timing = model.Timing{PrefillOverheadS: 0.010, PrefillPerTokenS: 1e-5, DecodeOverheadS: 0.002}
	w, err := New(Config{Name: "c", Profile: &p, BlockSize: 64, PoolTokens: 1000, ChunkTokens: 1 << 20,
		PrefixCache: true, MixedChunk: true, SliceTPOTS: 0.002, Session: SessionConfig{Enabled: true, TrimStallS: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	now := fullOn(t, w, 0, 1, "s", chain(5, 4), 256, 1)
	a := &Request{ID: 2, Kind: Full, Blocks: chain(6, 2), Input: 100, Output: 11}
	w.Submit(now, a)
	w.Advance(now)
	t0, _ := w.NextTime()
	w.Advance(t0)
	if !near(t0, 0.02356) || w.free() != 633 {
		t.Fatalf("a's first token at %v with %d free, want 0.02356 and 633", t0, w.free())
	}
	if rep := w.AdmitSession(t0, AdmitQuery{Session: "n", Blocks: chain(7, 11), Input: 699, Output: 1}); !rep.CanAdmit || rep.Trimmed != 1 {
		t.Fatalf("admission %+v, want granted with s trimmed", rep)
	}
	w.Submit(t0, &Request{ID: 3, Kind: Full, Blocks: chain(8, 1), Input: 50, Output: 1})
	drive(w, t0)
	if !near(a.FinishedAt, 0.54356) {
		t.Fatalf("a finished at %v, want 0.54356", a.FinishedAt)
	}
}
