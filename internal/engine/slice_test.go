package engine

import (
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/model"
)

// sliceWorker is a colocated worker with mixed chunks and a cost model
// simple enough to follow by hand: a prefill step is 10 ms plus 10 µs a
// token, a decode step 2 ms whatever the batch.
func sliceWorker(t *testing.T, tpot float64) *Worker {
	t.Helper()
	p := *testProfile(t)
	p.Timing = model.Timing{PrefillOverheadS: 0.010, PrefillPerTokenS: 1e-5, DecodeOverheadS: 0.002}
	w, err := New(Config{Name: "c", Profile: &p, BlockSize: 64, PoolTokens: 1 << 20, ChunkTokens: 1 << 20,
		PrefixCache: true, MixedChunk: true, SliceTPOTS: tpot})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestSliceHoldsTPOT: request a (100 input, 101 output tokens) decodes when
// b, a 200,000-token prompt, arrives. With a TPOT of 12 ms a's stall budget
// at its first token is 0.012·100 − 0 − 100·0.002 = 1.0 s, so b's first
// chunk is the step cap, 16·12 ms = 192 ms: 10 ms overhead and 18,200
// tokens. Each such step takes 192 − 2 ms of a's budget: after five, 0.05 s
// is left, which holds one more chunk of 4,000 tokens (a 50 ms step); the
// 0.002 s left then holds no 256-token chunk, so the worker decodes a to its
// end and a's TPOT is within 12 ms. Without slicing b's whole prompt runs in
// one 2.01 s step and a's TPOT is (2.01 + 99·0.002)/100 = 22.1 ms.
func TestSliceHoldsTPOT(t *testing.T) {
	for _, tc := range []struct {
		tpot     float64
		first    int     // b's first chunk
		aTPOTMax float64 // a's TPOT at most
		aTPOTMin float64 // and at least
	}{
		{0.012, 18200, 0.012 + 1e-9, 0.0119},
		{0, 200000, 0.02208 + 1e-9, 0.02208 - 1e-9},
	} {
		w := sliceWorker(t, tc.tpot)
		a := &Request{ID: 1, Kind: Full, Blocks: []uint64{1, 2}, Input: 100, Output: 101}
		w.Submit(0, a)
		_ = advanceTo(w, 0)
		t0, _ := w.NextTime() // a's prefill step ends; its first token
		w.Advance(t0)
		b := &Request{ID: 2, Kind: Full, Blocks: []uint64{3}, Input: 200000, Output: 1}
		w.Submit(t0, b)
		if n := w.plan.chunks[0].n; len(w.plan.chunks) != 1 || n != tc.first {
			t.Fatalf("tpot %v: b's first chunk %d tokens, want %d", tc.tpot, n, tc.first)
		}
		_, evs := drive(w, t0)
		var aEnd float64
		for _, ev := range evs {
			if ev.Kind == EvFinished && ev.Req == a {
				aEnd = ev.Time
			}
		}
		got := (aEnd - a.FirstTokenAt) / 100
		if got > tc.aTPOTMax || got < tc.aTPOTMin {
			t.Fatalf("tpot %v: a's TPOT %.6f s, want in [%.6f, %.6f]", tc.tpot, got, tc.aTPOTMin, tc.aTPOTMax)
		}
		if b.Stage != StageDone {
			t.Fatalf("tpot %v: b never finished its prefill (stage %v)", tc.tpot, b.Stage)
		}
	}
}
