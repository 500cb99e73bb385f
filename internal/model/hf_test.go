package model

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func near(got, want, rel float64) bool { return math.Abs(got-want) <= rel*math.Abs(want) }

// TestHFParams checks parameter counts against the ones the model cards
// publish, for every family the parser knows.
func TestHFParams(t *testing.T) {
	for _, c := range []struct {
		file           string
		total, active  float64 // billions, from the model cards
		kvElems        int64   // per token per layer
		experts, moeL  int
		window, slideL int
		weights        string
	}{
		{"llama-2-7b-hf.json", 6.738, 6.738, 2 * 32 * 128, 0, 0, 0, 0, "fp16"},
		{"qwen2.5-32b-instruct.json", 32.76, 32.76, 2 * 8 * 128, 0, 0, 0, 0, "bf16"},
		{"mistral-7b-v0.1.json", 7.24, 7.24, 2 * 8 * 128, 0, 0, 4096, 32, "bf16"},
		// Mixtral's card: 46.7 B parameters, 12.9 B active (top-2 of 8).
		{"mixtral-8x7b-v0.1.json", 46.70, 12.88, 2 * 8 * 128, 8, 32, 0, 0, "bf16"},
		{"qwen3-30b-a3b.json", 30.53, 3.35, 2 * 4 * 128, 128, 48, 0, 0, "bf16"},
		{"deepseek-v3.json", 671, 37.5, 512 + 64, 256, 58, 0, 0, "fp8"},
		{"gpt-oss-120b.json", 116.8, 5.13 + 0.58, 2 * 8 * 64, 128, 36, 128, 18, "mxfp4-experts"},
	} {
		a, err := LoadHF(filepath.Join("testdata", "hf", c.file))
		if err != nil {
			t.Fatal(err)
		}
		p := a.Params()
		total := float64(p.Dense+p.Experts+p.Embed+p.LMHead) / 1e9
		// Active excludes the input embedding, as model cards count it
		// (a lookup, not a multiply); Llama's card counts everything, and
		// GPT-OSS's 5.13 B leaves out its 0.58 B unembedding too.
		active := float64(p.ActivePerToken+p.Embed) / 1e9
		if !near(total, c.total, 0.02) {
			t.Errorf("%s: %.3f B parameters, want %.3f B (±2 %%)", c.file, total, c.total)
		}
		if !near(active, c.active, 0.05) {
			t.Errorf("%s: %.3f B active, want %.3f B (±5 %%)", c.file, active, c.active)
		}
		if got := a.KVElemsPerTokenLayer(); got != c.kvElems {
			t.Errorf("%s: KV %d elements per token per layer, want %d", c.file, got, c.kvElems)
		}
		if a.Experts != c.experts || a.MoELayers != c.moeL {
			t.Errorf("%s: %d experts on %d layers, want %d on %d", c.file, a.Experts, a.MoELayers, c.experts, c.moeL)
		}
		if a.SlidingWindow != c.window || a.SlidingLayers != c.slideL {
			t.Errorf("%s: window %d on %d layers, want %d on %d", c.file, a.SlidingWindow, a.SlidingLayers, c.window, c.slideL)
		}
		if a.WeightDType != c.weights {
			t.Errorf("%s: weights %s, want %s", c.file, a.WeightDType, c.weights)
		}
	}
}

// TestHFSharedExperts: DeepSeek-V3's always-on shared expert (one of
// moe_intermediate_size 2048) is its own term, not folded into the routed
// ones; without it the 37.5 B active count above would still pass (it is
// 2.6 B, inside that row's tolerance), so the width is checked exactly.
func TestHFSharedExperts(t *testing.T) {
	for _, c := range []struct {
		file        string
		sharedWidth int
		topK        int
	}{{"deepseek-v3.json", 2048, 8}, {"qwen3-30b-a3b.json", 0, 8}, {"mixtral-8x7b-v0.1.json", 0, 2}, {"gpt-oss-120b.json", 0, 4}} {
		a, err := LoadHF(filepath.Join("testdata", "hf", c.file))
		if err != nil {
			t.Fatal(err)
		}
		if a.SharedWidth != c.sharedWidth || a.TopK != c.topK {
			t.Errorf("%s: shared experts %d wide, top-%d; want %d, top-%d", c.file, a.SharedWidth, a.TopK, c.sharedWidth, c.topK)
		}
	}
	// The shared expert's three matrices on each of the 58 MoE layers are
	// in the active count: removing them takes exactly that many away.
	a, _ := LoadHF(filepath.Join("testdata", "hf", "deepseek-v3.json"))
	b := *a
	b.SharedWidth = 0
	if got, want := a.Params().ActivePerToken-b.Params().ActivePerToken, int64(58*3*7168*2048); got != want {
		t.Errorf("shared experts add %d active parameters, want 58 × 3 × 7168 × 2048 = %d", got, want)
	}
}

// TestHFWeightBytes: DeepSeek-V3's FP8 checkpoint is about 671 GB, GPT-OSS
// 120B's MXFP4 one about 63 GB (the published download sizes, ±6 %).
func TestHFWeightBytes(t *testing.T) {
	for _, c := range []struct {
		file string
		gb   float64
	}{{"deepseek-v3.json", 671}, {"gpt-oss-120b.json", 63}, {"llama-2-7b-hf.json", 13.48}} {
		a, err := LoadHF(filepath.Join("testdata", "hf", c.file))
		if err != nil {
			t.Fatal(err)
		}
		if got := float64(a.WeightBytes()) / 1e9; !near(got, c.gb, 0.06) {
			t.Errorf("%s: %.1f GB of weights, want about %.0f", c.file, got, c.gb)
		}
	}
}

func TestHFErrors(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`{`, "config.json"},
		{`{"num_hidden_layers": 0, "hidden_size": 1, "num_attention_heads": 1, "vocab_size": 1}`, "num_hidden_layers = 0"},
		{`{"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2, "vocab_size": 10, "num_local_experts": 4, "num_experts_per_tok": 5}`, "num_experts_per_tok = 5"},
	} {
		_, err := FromHF([]byte(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("FromHF(%s) = %v, want an error with %q", c.in, err, c.want)
		}
	}
	// A multimodal config's text part is used.
	a, err := FromHF([]byte(`{"model_type": "llava", "text_config": {"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2, "vocab_size": 10, "intermediate_size": 16}}`))
	if err != nil || a.Layers != 2 || a.ModelType != "llava" {
		t.Fatalf("text_config: %+v, %v", a, err)
	}
}

// TestPoolAgainstRealRuns: the vLLM pool formula gives the KV blocks each
// real run logged (kv_blocks_total_gpu) within 0.2 %.
func TestPoolAgainstRealRuns(t *testing.T) {
	dir := filepath.Join("..", "..", "..", "shared", "realruns", "model_configs")
	if _, err := os.Stat(dir); err != nil {
		t.Skip("../shared/realruns absent (a fresh clone has no ../shared)")
	}
	g, _ := LookupGPU("h100-sxm")
	for _, c := range []struct {
		file   string
		tp     int
		blocks int64
	}{{"Llama-2-7b-hf", 1, 7462}, {"Llama-2-70b-hf", 4, 31356}, {"Mixtral-8x7B-v0.1", 2, 27510}, {"CodeLlama-34b-Instruct-hf", 2, 26602}} {
		a, err := LoadHF(filepath.Join(dir, c.file+".json"))
		if err != nil {
			t.Fatal(err)
		}
		d := Deployment{GPU: g, TP: c.tp, Engine: "vllm", MemFraction: 0.9, MaxBatchedTokens: 2048, MaxSeqs: 128}
		got := d.PoolTokens(a, DefaultCoefficients, 16) / 16
		if !near(float64(got), float64(c.blocks), 0.002) {
			t.Errorf("%s TP%d: %d blocks, vLLM logged %d", c.file, c.tp, got, c.blocks)
		}
		p, err := d.Profile(a, DefaultCoefficients, 16)
		if err != nil {
			t.Fatal(err)
		}
		if p.KVPoolTokens(0) != got*16 {
			t.Errorf("%s: profile pool %d tokens, deployment %d", c.file, p.KVPoolTokens(0), got*16)
		}
	}
}
