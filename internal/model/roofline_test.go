package model

import (
	"path/filepath"
	"strings"
	"testing"
)

func arch(t *testing.T, f string) *Arch {
	t.Helper()
	a, err := LoadHF(filepath.Join("testdata", "hf", f))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func gpu(t *testing.T, n string) GPU {
	t.Helper()
	g, err := LookupGPU(n)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestRooflineTP: TP splits GEMM and attention work and the KV a GPU
// holds, and adds two collectives per layer; TP1 has none.
func TestRooflineTP(t *testing.T) {
	a := arch(t, "qwen2.5-32b-instruct.json")
	c := DefaultCoefficients
	one := Deployment{GPU: gpu(t, "h100-sxm"), TP: 1}
	four := Deployment{GPU: gpu(t, "h100-sxm"), TP: 4}
	t1, t4 := one.Timing(a, c), four.Timing(a, c)
	peak := 989.4e12
	wantFLOP := 2 * float64(a.Params().ActivePerToken) / (peak * c.GEMMEff)
	if !near(t1.PrefillPerTokenS, wantFLOP, 1e-9) {
		t.Errorf("TP1 prefill per token %g, want 2·active/(peak·eff) = %g", t1.PrefillPerTokenS, wantFLOP)
	}
	// TP4: a quarter of the FLOPs plus the all-reduce payload:
	// 2 per layer × 64 layers × 5120 × 2 B × 2·3/4 over 450 GB/s × link_eff.
	coll := 2 * 64 * 5120 * 2 * 2 * 0.75 / (450e9 * c.LinkEff)
	if !near(t4.PrefillPerTokenS, wantFLOP/4+coll, 1e-9) {
		t.Errorf("TP4 prefill per token %g, want %g + %g", t4.PrefillPerTokenS, wantFLOP/4, coll)
	}
	if !near(t4.PrefillAttnS, t1.PrefillAttnS/4, 1e-9) {
		t.Errorf("TP4 attention %g, want a quarter of %g", t4.PrefillAttnS, t1.PrefillAttnS)
	}
	if d := t4.DecodeOverheadS; d <= 2*64*3*c.CollectiveS {
		t.Errorf("TP4 decode overhead %g lacks 128 collectives of 3 ring steps of %g", t4.DecodeOverheadS, c.CollectiveS)
	}
	if got, want := t4.DecodeOverheadS, c.StepS+64*c.LayerS+128*3*c.CollectiveS+float64(a.WeightBytes())/4/(3.35e12*c.BWEff); !near(got, want, 1e-6) {
		t.Errorf("TP4 decode overhead %g, want step + layers + collectives + a quarter of the weights read = %g", got, want)
	}
	// 8 KV heads over 4 GPUs: 2 heads each.
	if !near(t4.DecodePerCtxTokenS, t1.DecodePerCtxTokenS/4, 1e-9) {
		t.Errorf("TP4 KV read per token %g, want a quarter of %g", t4.DecodePerCtxTokenS, t1.DecodePerCtxTokenS)
	}
}

// TestKVReplication: fewer KV heads than GPUs and MLA's latent replicate
// the KV; DP attention does not; fp8 halves it.
func TestKVReplication(t *testing.T) {
	q := arch(t, "qwen3-30b-a3b.json") // 4 KV heads
	d8 := Deployment{GPU: gpu(t, "h200"), TP: 8}
	d8.defaults(q)
	if g := d8.split(q); g.kvPerToken != 48*2*128*2 || g.kvReplicas != 2 {
		t.Errorf("Qwen3 TP8: %d B/token on a GPU, %d replicas; want one head of 24,576 B, 2 replicas", g.kvPerToken, g.kvReplicas)
	}
	ds := arch(t, "deepseek-v3.json")
	tp := Deployment{GPU: gpu(t, "h200"), TP: 8}
	tp.defaults(ds)
	dp := tp
	dp.DPAttention = true
	gt, gd := tp.split(ds), dp.split(ds)
	if gt.kvPerToken != 61*576*2 || gt.kvReplicas != 8 || gd.kvReplicas != 1 {
		t.Errorf("DeepSeek-V3 TP8: %d B/token, replicas %d (DP attention %d); want 70,272 B, 8 and 1", gt.kvPerToken, gt.kvReplicas, gd.kvReplicas)
	}
	c := DefaultCoefficients
	pt, pd := tp.PoolTokens(ds, c, 16), dp.PoolTokens(ds, c, 16)
	if pd < 5*pt {
		t.Errorf("DP attention pool %d tokens, want over 5× the TP pool's %d (8× less the replicated attention weights)", pd, pt)
	}
	f8 := tp
	f8.KVBits = 8
	if g := f8.split(ds); g.kvPerToken != gt.kvPerToken/2 {
		t.Errorf("fp8 KV %d B/token, want half of %d", g.kvPerToken, gt.kvPerToken)
	}
}

// Sliding-window layers read each sequence's context up to the window, the
// full-attention layers all of it: GPT-OSS (every other layer sliding over
// 128 tokens) keeps half its context cost per token and pays the other
// half on at most 128 tokens a sequence; Mistral-7B v0.1 (every layer
// sliding over 4,096) pays all of it per windowed token, so below 4,096
// tokens it reads its whole context, as the engine does.
func TestSlidingWindowReadsLess(t *testing.T) {
	d := Deployment{GPU: gpu(t, "h100-sxm"), TP: 1}
	for _, c := range []struct {
		file      string
		fullShare float64
		window    int
	}{{"gpt-oss-120b.json", 0.5, 128}, {"mistral-7b-v0.1.json", 0, 4096}} {
		a := arch(t, c.file)
		full := *a
		full.SlidingLayers, full.SlidingWindow = 0, 0
		s, f := d.Timing(a, DefaultCoefficients), d.Timing(&full, DefaultCoefficients)
		if !near(s.DecodePerCtxTokenS, f.DecodePerCtxTokenS*c.fullShare, 1e-9) || !near(s.DecodePerWindowCtxTokenS, f.DecodePerCtxTokenS*(1-c.fullShare), 1e-9) || s.SlidingWindow != c.window {
			t.Errorf("%s: %g per context token + %g per windowed token (window %d), want %g·%g + %g·%g (window %d)", c.file,
				s.DecodePerCtxTokenS, s.DecodePerWindowCtxTokenS, s.SlidingWindow, c.fullShare, f.DecodePerCtxTokenS, 1-c.fullShare, f.DecodePerCtxTokenS, c.window)
		}
		if got, want := s.WindowedCtx(c.window/2), c.window/2; got != want {
			t.Errorf("%s: %d windowed tokens of %d, want all", c.file, got, want)
		}
		if got := s.WindowedCtx(3 * c.window); got != c.window {
			t.Errorf("%s: %d windowed tokens of %d, want the window %d", c.file, got, 3*c.window, c.window)
		}
	}
}

func TestDeploymentErrors(t *testing.T) {
	a := arch(t, "qwen2.5-32b-instruct.json")
	moe := arch(t, "qwen3-30b-a3b.json")
	h := gpu(t, "h100-sxm")
	for _, c := range []struct {
		a    *Arch
		d    Deployment
		want string
	}{
		{a, Deployment{GPU: h, TP: 3}, "does not divide"},
		{a, Deployment{GPU: h, TP: 2, EP: 2}, "expert parallelism"},
		{moe, Deployment{GPU: h, TP: 4, EP: 3}, "expert parallelism"},
		{a, Deployment{GPU: h, TP: 1, KVBits: 4}, "KV cache element width"},
		{a, Deployment{GPU: h, TP: 1, Engine: "trt"}, "engine"},
		{a, Deployment{GPU: gpu(t, "l40s"), TP: 1}, "leave no KV pool"},
	} {
		_, err := c.d.Profile(c.a, DefaultCoefficients, 16)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error with %q", c.d, err, c.want)
		}
	}
	if _, err := LookupGPU("tpu-v5"); err == nil || !strings.Contains(err.Error(), "h100-sxm") {
		t.Errorf("unknown GPU: %v", err)
	}
}

// TestExperimentAProfile: the seed's experiment A model class (a dense
// 32 B model at TP4 on H100) builds a valid profile with sources.
func TestExperimentAProfile(t *testing.T) {
	a := arch(t, "qwen2.5-32b-instruct.json")
	p, err := Deployment{GPU: gpu(t, "h100-80g"), TP: 4}.Profile(a, DefaultCoefficients, 16)
	if err != nil {
		t.Fatal(err)
	}
	if p.KVPoolTokens(0) < 500_000 {
		t.Errorf("pool %d tokens on 4× H100 for a 65 GB model, want > 500K", p.KVPoolTokens(0))
	}
	for _, k := range []string{"model", "timing", "hardware", "hardware.workspace_bytes"} {
		if p.Sources[k] == "" {
			t.Errorf("no source for %s", k)
		}
	}
	if p.Server.Scheduler != "sglang" || p.Model.KVBytesPerToken() != 64*2*8*128*2 {
		t.Errorf("server %+v, KV %d B/token over the group", p.Server, p.Model.KVBytesPerToken())
	}
}

// Expert parallelism swaps a MoE layer's all-reduce for two all-to-alls of
// the top-k copies: Qwen3-30B-A3B (top-8) at TP4 moves more per token.
func TestEPAllToAll(t *testing.T) {
	a := arch(t, "qwen3-30b-a3b.json")
	c := DefaultCoefficients
	tp := Deployment{GPU: gpu(t, "h200"), TP: 4}
	ep := tp
	ep.EP = 4
	vec := 2048.0 * 2
	want := 48 * (2*8*vec*0.75 - vec*2*0.75) / (450e9 * c.LinkEff)
	if got := ep.Timing(a, c).PrefillPerTokenS - tp.Timing(a, c).PrefillPerTokenS; !near(got, want, 1e-9) {
		t.Fatalf("EP4 adds %g s per token, want 48 MoE layers × (two top-8 all-to-alls − one all-reduce) = %g", got, want)
	}
}

// SGLang's pool: mem_fraction_static · total − weights − workspace, in
// whole blocks; its default fraction 0.88 when none is given.
func TestSGLangPoolFormula(t *testing.T) {
	a := arch(t, "llama-2-7b-hf.json")
	g := gpu(t, "h100-sxm")
	c := DefaultCoefficients
	d := Deployment{GPU: g, TP: 1, Engine: "sglang"}
	free := int64(float64(g.UsableBytes)*0.88) - a.WeightBytes() - c.WorkspaceBytes
	want := free / (32 * 2 * 32 * 128 * 2)
	want -= want % 16
	if got := d.PoolTokens(a, c, 16); got != want {
		t.Fatalf("pool %d tokens, want (0.88 · %d − %d − %d) / 524,288 = %d", got, g.UsableBytes, a.WeightBytes(), c.WorkspaceBytes, want)
	}
}

// TP over PCIe: where a GPU has no NVLink (L40S) the same two all-reduces
// per layer are charged from its PCIe Gen4 x16 datasheet bandwidth,
// 32 GB/s per direction, 14× NVLink 4's: Llama-2-7B at TP2 pays
// 2 × 32 layers × 4096 × 2 B × 2·(1/2) per token over 32 GB/s.
func TestRooflineTPOverPCIe(t *testing.T) {
	a := arch(t, "llama-2-7b-hf.json")
	c := DefaultCoefficients
	for _, g := range []struct {
		name string
		bw   float64
	}{{"l40s", 32e9}, {"h100-sxm", 450e9}} {
		one := Deployment{GPU: gpu(t, g.name), TP: 1}
		two := Deployment{GPU: gpu(t, g.name), TP: 2}
		t1, t2 := one.Timing(a, c), two.Timing(a, c)
		coll := 2 * 32 * 4096 * 2 * 2 * 0.5 / (g.bw * c.LinkEff)
		if got := t2.PrefillPerTokenS - t1.PrefillPerTokenS/2; !near(got, coll, 1e-9) {
			t.Errorf("%s TP2: all-reduce %g s per token, want %g over %g B/s", g.name, got, coll, g.bw)
		}
	}
}

// The all-reduce's latency per link: Llama-2-7B at TP2 and TP4 on L40S
// pays NCCL's ring LL latency over PCIe on each of its 64 all-reduces (two
// per layer), 6.6 µs + 2.0 µs per peer: 64 × 8.6 = 550.4 µs a step at TP2,
// 64 × 12.6 = 806.4 µs at TP4; on H100 SXM the 5 µs per peer fitted on
// NVLink: 64 × 5 = 320 µs at TP2; on MI300X RCCL's ring LL latency over
// Infinity Fabric, 12.0 µs + 1.6 µs per peer: 64 × 13.6 = 870.4 µs at TP2,
// 64 × 23.2 = 1,484.8 µs at TP8. The decode step's fixed cost is then
// step 1,106.7 µs + 32 layers × 20 µs + the weights' read (each GPU's half
// or quarter over its HBM) + that latency.
func TestAllReduceLatencyPerLink(t *testing.T) {
	a := arch(t, "llama-2-7b-hf.json")
	c := DefaultCoefficients
	for _, g := range []struct {
		name string
		tp   int
		hbm  float64
		lat  float64 // the step's all-reduce latency, by hand
	}{{"l40s", 2, 864e9, 64 * 8.6e-6}, {"l40s", 4, 864e9, 64 * 12.6e-6}, {"h100-sxm", 2, 3.35e12, 64 * 5e-6},
		// MI300X over Infinity Fabric, RCCL's MI300X model: 12.0 + 1.6·(TP−1) µs.
		{"mi300x", 2, 5.3e12, 64 * 13.6e-6}, {"mi300x", 8, 5.3e12, 64 * 23.2e-6}} {
		d := Deployment{GPU: gpu(t, g.name), TP: g.tp}
		d.defaults(a)
		weights := float64(d.split(a).weights)
		want := 1.1067e-3 + 32*20e-6 + weights/g.hbm + g.lat
		if got := d.Timing(a, c).DecodeOverheadS; !near(got, want, 1e-9) {
			t.Errorf("%s TP%d: decode step fixed cost %.2f us, want %.2f (all-reduce latency %.1f us)", g.name, g.tp, got*1e6, want*1e6, g.lat*1e6)
		}
	}
}

// DP attention in the step times: DeepSeek-V3 on 8 H200s. Under TP every
// GPU reads the whole MLA latent of every sequence (it is replicated);
// with DP attention each GPU reads only its own eighth of the batch's, so
// the context cost per token is an eighth. Its attention weights are whole
// on every GPU, so a decode step reads 7/8 of them more per GPU:
// 61 layers × attention parameters × 1 B (fp8) × 7/8 over the HBM.
func TestDPAttentionTiming(t *testing.T) {
	ds := arch(t, "deepseek-v3.json")
	c := DefaultCoefficients
	tp := Deployment{GPU: gpu(t, "h200"), TP: 8}
	dp := tp
	dp.DPAttention = true
	tt, td := tp.Timing(ds, c), dp.Timing(ds, c)
	if !near(td.DecodePerCtxTokenS, tt.DecodePerCtxTokenS/8, 1e-9) {
		t.Errorf("DP attention context cost %g per token, want an eighth of TP's %g", td.DecodePerCtxTokenS, tt.DecodePerCtxTokenS)
	}
	attnB := float64(int64(ds.Layers)*ds.attnParamsPerLayer()) * ds.denseWeightBits / 8
	want := attnB * 7 / 8 / (4.8e12 * c.BWEff)
	if got := td.DecodeOverheadS - tt.DecodeOverheadS; !near(got, want, 1e-6) {
		t.Errorf("DP attention reads %g s more weights a step, want the replicated attention's 7/8: %g", got, want)
	}
	if td.DecodeExpertsS != tt.DecodeExpertsS {
		t.Errorf("experts read %g with DP attention, %g without: the experts stay split", td.DecodeExpertsS, tt.DecodeExpertsS)
	}
}
