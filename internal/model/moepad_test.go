package model

import (
	"math"
	"testing"
)

// Two tokens, one of two experts each, tiles of 4: an expert's count is
// 0, 1, 2 with probability ¼, ½, ¼, so it runs 4 rows with probability ¾:
// 2 · 3 = 6 rows for 2 real ones.
func TestPaddedExpertRowsByHand(t *testing.T) {
	m := Model{Experts: 2, TopK: 1}
	if got := m.PaddedExpertRows(2, 4); math.Abs(got-6) > 1e-9 {
		t.Fatalf("padded rows %v, want 6", got)
	}
	if got := m.PaddedExpertRows(2, 1); got != 2 {
		t.Fatalf("no tiles: %v rows, want the 2 real ones", got)
	}
	if got := (Model{}).PaddedExpertRows(128, 64); got != 0 {
		t.Fatalf("dense model: %v padded rows, want 0", got)
	}
	// Mixtral at B = 128, top-2 of 8, tiles of 64: each expert's ~32 tokens
	// (never 0, P(c > 64) ≈ 1e-12) run as 64 rows: 512 for 256 real.
	mx := Model{Experts: 8, TopK: 2}
	if got := mx.PaddedExpertRows(128, 64); math.Abs(got-512) > 1e-6 {
		t.Fatalf("B=128: %v rows, want 512", got)
	}
	// B = 20, tiles of 16: an expert is idle with probability 0.75^20 (and
	// needs a second tile with P(c ≥ 17) ≈ 2.8e-8: 3.6e-6 rows more).
	if got, want := mx.PaddedExpertRows(20, 16), 8*16*(1-math.Pow(0.75, 20)); math.Abs(got-want) > 1e-5 {
		t.Fatalf("B=20: %v rows, want %v", got, want)
	}
}

// vLLM's tuned table for Mixtral at TP2 on H100 (nearest key, ties to the
// smaller) and its default rule elsewhere.
func TestVLLMExpertTiles(t *testing.T) {
	tm := Timing{ExpertTiles: vllmExpertTiles(8, 7168, "h100-sxm")}
	for _, c := range []struct{ tokens, bm int }{{1, 16}, {20, 16}, {40, 16}, {41, 32}, {96, 32}, {112, 32}, {113, 64}, {128, 64}, {768, 64}, {769, 128}, {2048, 128}} {
		if got := tm.BlockM(c.tokens); got != c.bm {
			t.Errorf("%d tokens: BLOCK_SIZE_M %d, want %d", c.tokens, got, c.bm)
		}
	}
	def := Timing{ExpertTiles: vllmExpertTiles(128, 384, "h100-sxm")}
	if def.BlockM(128) != 16 || def.BlockM(129) != 64 {
		t.Errorf("default rule: %d, %d; want 16 up to E tokens, 64 beyond", def.BlockM(128), def.BlockM(129))
	}
	if (Timing{}).BlockM(128) != 0 {
		t.Error("no rule must give 0")
	}
}

// Mixtral TP2 on H100 under vLLM: a padded row is one expert's three GEMMs
// in all 32 layers, split over 2 GPUs, at the 989.4 TFLOP/s peak:
// 2·(32·8·3·4096·14336)/8/2 FLOPs = 5.637 GFLOP → 5.697 µs. At B = 128 the
// 512 padded rows take 2.917 ms, under the 15.8 ms expert read the step
// already charges: no padding cost (the kernel is bandwidth-bound, as
// vLLM's own kernel benchmark shows: 471 µs a layer at B = 16, 491 µs at
// B = 128). With the read made cheap enough, the excess is charged.
func TestRooflineChargesExpertPadding(t *testing.T) {
	a, err := LoadHF("testdata/hf/mixtral-8x7b-v0.1.json")
	if err != nil {
		t.Fatal(err)
	}
	d := Deployment{GPU: gpus["h100-sxm"], TP: 2, Engine: "vllm"}
	tm := d.Timing(a, DefaultCoefficients)
	row := 2 * 32 * 8 * 3 * 4096 * 14336.0 / 8 / 2 / 989.4e12
	if math.Abs(tm.ExpertPadRowS-row)/row > 1e-9 {
		t.Fatalf("pad row %v s, want %v", tm.ExpertPadRowS, row)
	}
	m := Model{Experts: 8, TopK: 2}
	if got := tm.ExpertPaddingS(m, 128); got != 0 {
		t.Fatalf("B=128: padding %v s charged under a 15.8 ms expert read, want 0", got)
	}
	// Expert read of 1 ms: the 512 rows' 2.917 ms exceed it plus the 256
	// real rows' 1.458 ms by 0.458 ms (ExpertFraction(128) = 1 − 1e-16).
	cheap := tm
	cheap.DecodeExpertsS = 1e-3
	want := 512*row - 1e-3 - 256*row
	if got := cheap.ExpertPaddingS(m, 128); math.Abs(got-want) > 1e-9 {
		t.Fatalf("cheap read: padding %v s, want %v", got, want)
	}
	base := cheap
	base.ExpertPadRowS = 0
	if diff := cheap.DecodeStepS(m, 128, 1000) - base.DecodeStepS(m, 128, 1000); math.Abs(diff-want) > 1e-9 {
		t.Fatalf("decode step grows by %v, want the padding %v", diff, want)
	}
	sg := Deployment{GPU: gpus["h100-sxm"], TP: 2, Engine: "sglang"}
	if sg.Timing(a, DefaultCoefficients).ExpertPadRowS != 0 {
		t.Fatal("the tile rule is vLLM's; SGLang profiles must not get it here")
	}
}

// kv_bw_eff_large: Llama-2-7B at TP1 holds 32·32·128·2·2 = 524,288 bytes
// of KV a token; at 0.8 of 3.35 TB/s from B = 120 on that is 195.6 ns a
// context token, the datasheet rate's 156.5 ns below it.
func TestRooflineLargeBatchKVSlope(t *testing.T) {
	a, err := LoadHF("testdata/hf/llama-2-7b-hf.json")
	if err != nil {
		t.Fatal(err)
	}
	c := DefaultCoefficients
	c.KVBWEffLarge, c.LargeBatch = 0.8, 120
	tm := Deployment{GPU: gpus["h100-sxm"], TP: 1, Engine: "vllm"}.Timing(a, c)
	small, large := 524288/3.35e12, 524288/(3.35e12*0.8)
	if got := tm.CtxSlope(119); math.Abs(got-small)/small > 1e-9 {
		t.Fatalf("B=119: %v s a context token, want %v", got, small)
	}
	if got := tm.CtxSlope(120); math.Abs(got-large)/large > 1e-9 {
		t.Fatalf("B=120: %v s a context token, want %v", got, large)
	}
	if off := (Deployment{GPU: gpus["h100-sxm"], TP: 1, Engine: "vllm"}).Timing(a, DefaultCoefficients); off.LargeBatch != 0 || off.DecodePerCtxTokenLargeS != 0 {
		t.Fatal("the committed coefficients must leave the large-batch slope off")
	}
}
