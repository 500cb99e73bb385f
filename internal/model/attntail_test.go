package model

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// FA3's dynamic split rule by hand (flash_prepare_scheduler.cu): one
// 2,482-token sequence of Llama-2-70B at TP4 (2 KV heads a GPU) has 20
// blocks of 128; blocks_per_sm = ⌈20·1.1·2/132⌉ = 1, so it splits 16 ways
// (the cap); 128 sequences of 1,000 tokens have 8 blocks each, 1,024 in
// all, blocks_per_sm = ⌈1024·2.2/132⌉ = 18 and none splits.
func TestFA3SplitsByHand(t *testing.T) {
	a := &AttnTiles{KVHeads: 2, SMs: 132, BlockN: 128, MaxSplits: 16}
	if got := a.Splits([]int{2482}, nil); !slices.Equal(got, []int{16}) {
		t.Errorf("one long sequence: splits %v, want [16]", got)
	}
	big := make([]int, 128)
	for i := range big {
		big[i] = 1000
	}
	for i, s := range a.Splits(big, nil) {
		if s != 1 {
			t.Fatalf("128 × 1,000 tokens: sequence %d splits %d ways, want 1", i, s)
		}
	}
	// Four SMs, one head, 1,000 tokens: 8 blocks, blocks_per_sm ⌈8·1.1/4⌉
	// = 3, so ⌈8/3⌉ = 3 splits.
	b := &AttnTiles{KVHeads: 1, SMs: 4, BlockN: 128, MaxSplits: 16}
	if got := b.Splits([]int{1000}, nil); !slices.Equal(got, []int{3}) {
		t.Errorf("four SMs: splits %v, want [3]", got)
	}
}

// The list schedule by hand: tiles go in order to the CTA idle first.
func TestFA3MakespanByHand(t *testing.T) {
	for _, c := range []struct {
		name string
		a    AttnTiles
		ctxs []int
		want int64
	}{
		// 300 on CTA 0, 100 and 100 on CTA 1: 300.
		{"long first", AttnTiles{KVHeads: 1, SMs: 2, BlockN: 128, MaxSplits: 1}, []int{300, 100, 100}, 300},
		// 100, 100, then 300 on top of one of them: the tail, 400.
		{"long last", AttnTiles{KVHeads: 1, SMs: 2, BlockN: 128, MaxSplits: 1}, []int{100, 100, 300}, 400},
		// Head-major within a group: 100, 300 (head 0), then 100 goes to
		// the CTA at 100 (200) and 300 to it again (500).
		// Batch by batch, each batch's heads in turn: 100, 100 (batch 0),
		// then 300 and 300 on top of them: 400 (heads first would give
		// 100, 300, then 100 and 300 on the first CTA: 500).
		{"batch by batch", AttnTiles{KVHeads: 2, SMs: 2, BlockN: 128, MaxSplits: 1}, []int{100, 300}, 400},
		// 1,000 tokens in 3 splits of 3, 3 and 2 blocks: 384, 384, 232
		// on three of four CTAs.
		{"splits", AttnTiles{KVHeads: 1, SMs: 4, BlockN: 128, MaxSplits: 16}, []int{1000}, 384},
	} {
		var loads []int64
		var splits []int
		if got := c.a.Makespan(c.ctxs, &loads, &splits); got != c.want {
			t.Errorf("%s: makespan %d tokens, want %d", c.name, got, c.want)
		}
	}
}

// The tail is the makespan at the CTA's share of HBM less the linear term:
// contexts 100, 100, 300 on two CTAs at half the bandwidth each, 1 µs a
// context token: 400 tokens × 2 µs − 500 × 1 µs = 300 µs. At a share of 1
// a CTA alone could read the batch faster than the bandwidth bound: 0.
func TestAttnTailByHand(t *testing.T) {
	tm := Timing{DecodePerCtxTokenS: 1e-6, AttnTiles: &AttnTiles{KVHeads: 1, SMs: 2, BlockN: 128, MaxSplits: 1, CTAShare: 0.5}}
	var loads []int64
	var splits []int
	if got := tm.AttnTailS([]int{100, 100, 300}, &loads, &splits); math.Abs(got-300e-6) > 1e-12 {
		t.Errorf("tail %v s, want 300e-6", got)
	}
	tm.AttnTiles.CTAShare = 1
	if got := tm.AttnTailS([]int{100, 100, 300}, &loads, &splits); got != 0 {
		t.Errorf("tail at share 1: %v s, want 0", got)
	}
	tm.AttnTiles = nil
	if got := tm.AttnTailS([]int{100, 100, 300}, &loads, &splits); got != 0 {
		t.Errorf("no tiles: %v s, want 0", got)
	}
}

// The roofline attaches the tiles only where vLLM runs FA3 (Hopper) and
// the coefficient is set: Llama-2-70B at TP4 on H100 gets 2 KV heads a
// GPU, 132 SMs, 128-token blocks, 16 splits at most.
func TestRooflineAttachesFA3Tiles(t *testing.T) {
	a := &Arch{Name: "l70", Layers: 80, Hidden: 8192, QHeads: 64, KVHeads: 8, HeadDim: 128, Intermediate: 28672, Vocab: 32000, MaxContext: 4096, denseWeightBits: 16}
	g, _ := LookupGPU("h100-sxm")
	c := DefaultCoefficients
	d := Deployment{GPU: g, TP: 4, Engine: "vllm"}
	if d.Timing(a, c).AttnTiles != nil {
		t.Fatal("tiles attached with attn_cta_share 0")
	}
	c.AttnCTAShare = 0.01
	got := d.Timing(a, c).AttnTiles
	if got == nil || *got != (AttnTiles{KVHeads: 2, SMs: 132, BlockN: 128, MaxSplits: 16, CTAShare: 0.01}) {
		t.Fatalf("tiles %+v", got)
	}
	d.Engine = "sglang"
	if d.Timing(a, c).AttnTiles != nil {
		t.Error("tiles attached for SGLang")
	}
}

// Beyond eight tiles per CTA only the last wave is scheduled exactly:
// 4,096 equal tiles of 100 tokens on 132 CTAs (exactly ⌈4096/132⌉·100 =
// 3,200) come out as the even spread 3,010 − 50 + a stagger of up to
// 99·131/132 on the CTA that takes the last tile, plus that tile: within
// one tile of the exact 3,200.
func TestFA3MakespanManyWaves(t *testing.T) {
	a := &AttnTiles{KVHeads: 32, SMs: 132, BlockN: 128, MaxSplits: 1}
	ctxs := make([]int, 128)
	for i := range ctxs {
		ctxs[i] = 100
	}
	var loads []int64
	var splits []int
	got := a.Makespan(ctxs, &loads, &splits)
	// (4096−132)·100 = 396,400 spread: 3,003 a CTA less 50, staggered by
	// 100·i/132 up to 99; the last 132 tiles land one on each CTA.
	if want := int64(396400/132 - 50 + 100*131/132 + 100); got != want {
		t.Errorf("makespan %d tokens, want %d", got, want)
	}
	if d := got - 3200; d < -100 || d > 100 {
		t.Errorf("makespan %d: more than a tile from the exact 3,200", got)
	}
}

// A profile's tile description is checked: a share outside (0, 1] or a
// zero count is a clear error naming the field.
func TestProfileRejectsBadAttnTiles(t *testing.T) {
	for _, a := range []AttnTiles{
		{KVHeads: 2, SMs: 132, BlockN: 128, MaxSplits: 16, CTAShare: 0},
		{KVHeads: 2, SMs: 132, BlockN: 128, MaxSplits: 16, CTAShare: 1.5},
		{KVHeads: 0, SMs: 132, BlockN: 128, MaxSplits: 16, CTAShare: 0.01},
		{KVHeads: 2, SMs: 0, BlockN: 128, MaxSplits: 16, CTAShare: 0.01},
	} {
		p, err := Builtin("qwen3-30b-a3b", "h200-141g")
		if err != nil {
			t.Fatal(err)
		}
		a := a
		p.Timing.AttnTiles = &a
		if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "timing.attn_tiles") {
			t.Errorf("%+v: error %v, want one naming timing.attn_tiles", a, err)
		}
	}
}
