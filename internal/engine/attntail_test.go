package engine

import (
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/model"
)

// A decode step pays the tile schedule's tail from the batch's own
// contexts: three prompts of 100, 100 and 300 tokens prefill together
// (0.010 + 500·1e-4 = 0.060 s) and decode one step at contexts 101, 101,
// 301: 0.005 + 3·0.001 + 503 tokens · 1 µs = 0.008503 s, plus the tail —
// on two CTAs at half the bandwidth each the 301-token tile lands on top
// of a 101 (402 tokens · 2 µs = 804 µs), 301 µs over the linear term.
func TestDecodeStepPaysAttnTail(t *testing.T) {
	for _, c := range []struct {
		tiles *model.AttnTiles
		done  float64
	}{
		{nil, 0.068503},
		{&model.AttnTiles{KVHeads: 1, SMs: 2, BlockN: 128, MaxSplits: 1, CTAShare: 0.5}, 0.068804},
	} {
		p := roundProfile("vllm")
		p.Timing.DecodePerCtxTokenS = 1e-6
		p.Timing.AttnTiles = c.tiles
		w, err := New(Config{Name: "c", Profile: p, BlockSize: 16, ChunkTokens: 2048, PoolTokens: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range []int{100, 100, 300} {
			w.Submit(0, &Request{ID: int64(i + 1), Kind: Full, Input: n, Output: 2})
		}
		_, done := times(w)
		for id, at := range done {
			if !near(at, c.done) {
				t.Errorf("tiles %v: request %d done at %v, want %v", c.tiles != nil, id, at, c.done)
			}
		}
	}
}
