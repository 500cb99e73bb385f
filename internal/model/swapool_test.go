package model

import (
	"strings"
	"testing"
)

// SGLang serves GPT-OSS from two KV pools (set_num_tokens_hybrid_swa): the
// scheduler's pool is the full layers' tokens, and the sliding layers' pool
// holds 0.8 of them, so one pool token costs the full layers' KV plus 0.8
// of the sliding layers'. GPT-OSS-120B at TP1, bf16 KV: 8 KV heads × 64 ×
// 2 (K, V) × 2 bytes = 2,048 bytes per layer; 18 full layers 36,864, 18
// sliding 36,864 × 0.8 = 29,491 (floored): 66,355 bytes a pool token
// against 73,728 for every layer. At TP2, 4 heads a GPU: 18,432 +
// 14,745 = 33,177. Mistral-7B (every layer sliding, not in SGLang's
// hybrid-SWA list) and vLLM (one block pool; its reported pool counts
// every layer) keep every layer's 131,072 / 73,728 bytes.
func TestSGLangSWAPool(t *testing.T) {
	h := gpu(t, "h200")
	for _, c := range []struct {
		file   string
		d      Deployment
		perGPU int64 // bytes of one pool token on one GPU, by hand
		swa    bool
	}{
		{"gpt-oss-120b.json", Deployment{GPU: h, TP: 1, Engine: "sglang"}, 66355, true},
		{"gpt-oss-120b.json", Deployment{GPU: h, TP: 2, Engine: "sglang"}, 33177, true},
		{"gpt-oss-120b.json", Deployment{GPU: h, TP: 1, Engine: "sglang", SWAFullTokensRatio: 0.5}, 36864 + 18432, true},
		{"gpt-oss-120b.json", Deployment{GPU: h, TP: 1, Engine: "vllm"}, 73728, false},
		{"mistral-7b-v0.1.json", Deployment{GPU: h, TP: 1, Engine: "sglang"}, 131072, false},
	} {
		a := arch(t, c.file)
		if a.SWAPool != (c.file == "gpt-oss-120b.json") {
			t.Fatalf("%s: SWAPool %v", c.file, a.SWAPool)
		}
		d := c.d
		d.defaults(a)
		g := d.split(a)
		free := float64(h.UsableBytes)*d.MemFraction - float64(g.weights) - float64(DefaultCoefficients.WorkspaceBytes)
		if d.TP > 1 {
			free -= float64(DefaultCoefficients.TPWorkspaceBytes)
		}
		want := int64(free) / c.perGPU
		want -= want % 16
		if got := c.d.PoolTokens(a, DefaultCoefficients, 16); got != want {
			t.Errorf("%s %s TP%d: pool %d tokens, want %d (%d bytes a token)", c.file, c.d.Engine, c.d.TP, got, want, c.perGPU)
		}
		p, err := c.d.Profile(a, DefaultCoefficients, 16)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.KVPoolTokens(0); got != want {
			t.Errorf("%s %s TP%d: profile pool %d tokens, want %d", c.file, c.d.Engine, c.d.TP, got, want)
		}
		wantField := int64(0)
		if c.swa {
			wantField = c.perGPU * int64(c.d.TP)
		}
		wantRatio := 0.0
		if c.swa {
			wantRatio = cmpOrF(c.d.SWAFullTokensRatio, 0.8)
		}
		if p.Model.SWAPoolRatio != wantRatio {
			t.Errorf("%s %s TP%d: swa_pool_ratio %v, want %v (the engine's sliding pool)", c.file, c.d.Engine, c.d.TP, p.Model.SWAPoolRatio, wantRatio)
		}
		if p.Model.PoolBytesPerToken != wantField {
			t.Errorf("%s %s TP%d: pool_bytes_per_token %d, want %d", c.file, c.d.Engine, c.d.TP, p.Model.PoolBytesPerToken, wantField)
		}
		if p.Model.KVBytesPerToken() != 73728 && c.file == "gpt-oss-120b.json" {
			t.Errorf("%s: KV bytes per token %d (what transfers move), want every layer's 73,728", c.file, p.Model.KVBytesPerToken())
		}
	}
	bad := Deployment{GPU: h, TP: 1, SWAFullTokensRatio: 1.5}
	if _, err := bad.Profile(arch(t, "gpt-oss-120b.json"), DefaultCoefficients, 16); err == nil || !strings.Contains(err.Error(), "SWA-to-full tokens ratio") {
		t.Errorf("ratio 1.5: %v, want the ratio named", err)
	}
}

// The profile carries the sliding layers for the engine's vLLM freeing
// (engine/windowfree.go): GPT-OSS-120B 18 of 36 over 128 tokens, Mistral-7B
// v0.1 all 32 over 4,096, Llama-2 none; a count the model or the window
// cannot hold is refused with the field named.
func TestProfileSlidingLayers(t *testing.T) {
	h := gpu(t, "h200")
	for _, c := range []struct {
		file           string
		layers, window int
	}{{"gpt-oss-120b.json", 18, 128}, {"mistral-7b-v0.1.json", 32, 4096}, {"llama-2-7b-hf.json", 0, 0}} {
		p, err := Deployment{GPU: h, TP: 1, Engine: "vllm"}.Profile(arch(t, c.file), DefaultCoefficients, 16)
		if err != nil {
			t.Fatal(err)
		}
		if p.Model.SlidingLayers != c.layers || p.Timing.SlidingWindow != c.window {
			t.Errorf("%s: %d sliding layers over %d tokens, want %d over %d", c.file, p.Model.SlidingLayers, p.Timing.SlidingWindow, c.layers, c.window)
		}
		if c.layers == 0 {
			continue
		}
		for _, bad := range []func(*Profile){
			func(q *Profile) { q.Model.SWAPoolRatio = 1.5 },
			func(q *Profile) { q.Model.SlidingLayers = q.Model.Layers + 1 },
			func(q *Profile) { q.Model.SlidingLayers = -1 },
			func(q *Profile) { q.Timing.SlidingWindow, q.Timing.DecodePerWindowCtxTokenS = 0, 0 },
		} {
			q := *p
			bad(&q)
			if err := q.Validate(); err == nil || !(strings.Contains(err.Error(), "model.sliding_layers") || strings.Contains(err.Error(), "model.swa_pool_ratio")) {
				t.Errorf("%s: %v, want the field named", c.file, err)
			}
		}
	}
}
