package main

import (
	"strings"

	"github.com/spf13/pflag"

	"github.com/pdhybrid/pdhybrid/internal/model"
)

// modelConfigFlags build a profile from a Hugging Face config.json on a
// datasheet GPU (internal/model: hf.go, gpu.go, roofline.go) instead of a
// built-in profile, and choose the scheduler any profile's workers follow.
type modelConfigFlags struct {
	path        string
	tp, ep      int
	dpAttention bool
	kvDType     string
	engine      string
	scheduler   string
	contextLen  int
	swaRatio    float64
}

func (m *modelConfigFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&m.path, "model-config", "", "Hugging Face config.json `file` of the model to serve, replacing --model and --profile: dense/GQA, MoE (Mixtral, Qwen3-MoE, DeepSeek-V3 MLA and shared experts, GPT-OSS), sliding window; --hardware then names a datasheet GPU ("+strings.Join(model.GPUNames(), ", ")+"; h100-80g and h200-141g are aliases) and the step times come from the roofline (docs/fidelity.md)")
	fs.IntVar(&m.tp, "tp", 1, "with --model-config: tensor-parallel `GPUs` per worker, in [1, 64]; weights and KV heads split, two all-reduces per layer over the GPU's scale-up link")
	fs.IntVar(&m.ep, "ep", 1, "with --model-config, a MoE model: expert-parallel `GPUs` of the TP group the routed experts are split over (a divisor of --tp); 1 = experts split by TP")
	fs.BoolVar(&m.dpAttention, "dp-attention", false, "with --model-config: data-parallel attention across the TP group (SGLang --enable-dp-attention): KV never replicated, attention weights on every GPU")
	fs.StringVar(&m.kvDType, "kv-dtype", "auto", "with --model-config: KV cache element `type`: auto (the checkpoint's: bf16/fp16 as 16 bits), bf16, fp16 or fp8")
	fs.StringVar(&m.engine, "engine", "sglang", "with --model-config: the serving `engine` whose KV pool formula and defaults apply: sglang (mem_fraction_static, 8192-token chunks) or vllm (gpu_memory_utilization 0.9, 2048 batched tokens, 256 sequences); it also sets the scheduler unless --scheduler says otherwise")
	fs.IntVar(&m.contextLen, "context-length", 0, "with --model-config: the served context in `tokens` (SGLang --context-length, vLLM --max-model-len), in [1, 16777216]; 0 = the config's max_position_embeddings (× rope_scaling.factor where the config states YaRN)")
	fs.Float64Var(&m.swaRatio, "swa-full-tokens-ratio", 0.8, "with --model-config, --engine sglang and a model SGLang serves from two KV pools (GPT-OSS, Llama-4, Gemma-4, MiMo-V2, Step-3.5): SGLang's --swa-full-tokens-ratio, the `ratio` of the sliding layers' pool in tokens to the full layers' pool, in (0, 1]")
	fs.StringVar(&m.scheduler, "scheduler", "", "the `scheduler` every worker follows: sglang (prefill steps first, its own chunk budget) or vllm (V1: one token budget per step shared by decodes and prefill chunks, decodes first; internal/engine/vllm.go); default: the profile's (built-ins: sglang; --model-config: --engine)")
}

// check validates the flags.
func (m *modelConfigFlags) check(ck *checks) {
	if m.scheduler != "" {
		ck.oneOf("scheduler", "sglang", "vllm")
	}
	ck.oneOf("engine", "sglang", "vllm")
	ck.oneOf("kv-dtype", "auto", "bf16", "fp16", "fp8")
	ck.num("tp", between(1, 64).is("a number of GPUs"))
	ck.num("ep", between(1, 64).is("a number of GPUs"))
	on := m.path != ""
	ck.num("context-length", between(1, 1<<24).is("a number of tokens").orZero("the config's"))
	ck.num("swa-full-tokens-ratio", above(0).upTo(1).is("a ratio"))
	for _, n := range []string{"tp", "ep", "dp-attention", "kv-dtype", "engine", "context-length", "swa-full-tokens-ratio"} {
		ck.only(n, on, "with --model-config")
	}
	if on {
		ck.only("model", false, "without --model-config (the config names the model)")
		ck.only("profile", false, "without --model-config")
		if m.ep > 1 && m.tp%m.ep != 0 {
			ck.fail("--ep %d: want a divisor of --tp %d", m.ep, m.tp)
		}
	}
}

// profile builds the profile --model-config describes on hardware.
func (m *modelConfigFlags) profile(hardware string) (*model.Profile, error) {
	a, err := model.LoadHF(m.path)
	if err != nil {
		return nil, usagef("--model-config: %v", err)
	}
	g, err := model.LookupGPU(hardware)
	if err != nil {
		return nil, usagef("--hardware: %v", err)
	}
	d := model.Deployment{GPU: g, TP: m.tp, EP: m.ep, DPAttention: m.dpAttention, Engine: m.engine, KVBits: 16, MaxModelLen: m.contextLen,
		SWAFullTokensRatio: m.swaRatio}
	if m.kvDType == "fp8" {
		d.KVBits = 8
	}
	p, err := d.Profile(a, model.DefaultCoefficients, 16)
	if err != nil {
		return nil, usagef("--model-config %s: %v", m.path, err)
	}
	return p, nil
}

// applyScheduler sets --scheduler on a resolved profile.
func (m *modelConfigFlags) applyScheduler(p *model.Profile) {
	if m.scheduler == "" {
		return
	}
	var s model.Server
	if p.Server != nil {
		s = *p.Server
	}
	s.Scheduler = m.scheduler
	p.Server = &s
}
