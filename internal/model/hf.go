package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// Arch is a transformer's architecture as far as serving cost goes, read
// from its Hugging Face config.json (FromHF). It covers dense and GQA models
// (Llama, Qwen, Mistral), mixtures of experts (Mixtral, Qwen3-MoE,
// DeepSeek-V3 with its shared experts and dense first layers, GPT-OSS),
// multi-head latent attention (DeepSeek's MLA) and sliding-window layers.
type Arch struct {
	Name         string
	ModelType    string
	Layers       int
	Hidden       int
	QHeads       int
	KVHeads      int
	HeadDim      int
	Intermediate int // dense FFN width (gated: three matrices)
	Vocab        int
	TiedEmbed    bool
	MaxContext   int
	// Mixture of experts: Experts routed experts of width MoEIntermediate,
	// TopK of them per token, SharedWidth the summed width of the always-on
	// shared experts; MoELayers of the Layers carry experts, the rest a
	// dense FFN of width Intermediate.
	Experts         int
	TopK            int
	MoEIntermediate int
	SharedWidth     int
	MoELayers       int
	// MLA (DeepSeek-V2/V3): the KV cache holds one latent of KVLoraRank plus
	// a RoPE key of QKRopeDim per token and layer, shared by all heads.
	KVLoraRank, QLoraRank          int
	QKNopeDim, QKRopeDim, VHeadDim int
	MTPLayers                      int // multi-token-prediction layers (weights only)
	SlidingWindow                  int // tokens; 0 = none
	SlidingLayers                  int // layers that attend only within SlidingWindow
	// SWAPool: SGLang serves the architecture from two KV pools, the
	// sliding layers' sized at --swa-full-tokens-ratio of the full
	// layers' (its is_hybrid_swa_model list: GPT-OSS, Llama-4, Gemma-4,
	// MiMo-V2, Step-3.5); every other sliding model, Mistral and Gemma-2/3
	// included, keeps every token of every layer in one pool there.
	SWAPool                           bool
	WeightDType                       string
	expertWeightBits, denseWeightBits float64
}

// hfConfig is the union of the config.json fields the architectures above
// use. Pointers tell "absent" from zero where the default differs.
type hfConfig struct {
	ModelType            string          `json:"model_type"`
	Architectures        []string        `json:"architectures"`
	NameOrPath           string          `json:"_name_or_path"`
	Layers               int             `json:"num_hidden_layers"`
	Hidden               int             `json:"hidden_size"`
	Heads                int             `json:"num_attention_heads"`
	KVHeads              *int            `json:"num_key_value_heads"`
	HeadDim              int             `json:"head_dim"`
	Intermediate         int             `json:"intermediate_size"`
	Vocab                int             `json:"vocab_size"`
	Tied                 bool            `json:"tie_word_embeddings"`
	MaxPos               int             `json:"max_position_embeddings"`
	TorchDType           string          `json:"torch_dtype"`
	DType                string          `json:"dtype"`
	LocalExperts         int             `json:"num_local_experts"`
	NumExperts           int             `json:"num_experts"`
	RoutedExperts        int             `json:"n_routed_experts"`
	ExpertsPerTok        int             `json:"num_experts_per_tok"`
	ExpertsPerToken      int             `json:"experts_per_token"`
	MoEIntermediate      int             `json:"moe_intermediate_size"`
	SharedExperts        int             `json:"n_shared_experts"`
	SharedIntermediate   int             `json:"shared_expert_intermediate_size"`
	FirstKDense          int             `json:"first_k_dense_replace"`
	MoELayerFreq         int             `json:"moe_layer_freq"`
	SparseStep           int             `json:"decoder_sparse_step"`
	MLPOnlyLayers        []int           `json:"mlp_only_layers"`
	KVLoraRank           int             `json:"kv_lora_rank"`
	QLoraRank            int             `json:"q_lora_rank"`
	QKNopeDim            int             `json:"qk_nope_head_dim"`
	QKRopeDim            int             `json:"qk_rope_head_dim"`
	VHeadDim             int             `json:"v_head_dim"`
	NextN                int             `json:"num_nextn_predict_layers"`
	SlidingWindow        *int            `json:"sliding_window"`
	UseSlidingWindow     *bool           `json:"use_sliding_window"`
	MaxWindowLayers      int             `json:"max_window_layers"`
	LayerTypes           []string        `json:"layer_types"`
	Quantization         *hfQuantization `json:"quantization_config"`
	TextConfig           json.RawMessage `json:"text_config"`
	OriginalMaxPos       int             `json:"original_max_position_embeddings"`
	SlidingWindowPattern int             `json:"sliding_window_pattern"`
	RopeScaling          *struct {
		Type     string  `json:"type"`
		RopeType string  `json:"rope_type"`
		Factor   float64 `json:"factor"`
		Original int     `json:"original_max_position_embeddings"`
	} `json:"rope_scaling"`
}

type hfQuantization struct {
	Method string `json:"quant_method"`
	Format string `json:"fmt"`
	Bits   int    `json:"bits"`
}

// LoadHF reads a Hugging Face config.json.
func LoadHF(path string) (*Arch, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	a, err := FromHF(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if a.Name == "" {
		base := path[strings.LastIndexAny(path, `/\`)+1:]
		a.Name = strings.ToLower(strings.TrimSuffix(strings.TrimSuffix(base, ".json"), "config"))
		a.Name = strings.Trim(a.Name, "-_.")
		if a.Name == "" {
			a.Name = a.ModelType
		}
	}
	return a, nil
}

// FromHF parses a config.json. A multimodal config's text_config is used
// when the top level has no layers.
func FromHF(data []byte) (*Arch, error) {
	var c hfConfig
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, fmt.Errorf("config.json: %w", err)
	}
	if c.Layers == 0 && len(c.TextConfig) > 0 && !bytes.Equal(c.TextConfig, []byte("null")) {
		var t hfConfig
		if err := json.Unmarshal(c.TextConfig, &t); err != nil {
			return nil, fmt.Errorf("config.json text_config: %w", err)
		}
		if t.ModelType == "" {
			t.ModelType = c.ModelType
		}
		if t.Quantization == nil {
			t.Quantization = c.Quantization
		}
		c = t
	}
	var errs []string
	need := func(field string, v int) {
		if v <= 0 {
			errs = append(errs, fmt.Sprintf("%s = %d, expected > 0", field, v))
		}
	}
	need("num_hidden_layers", c.Layers)
	need("hidden_size", c.Hidden)
	need("num_attention_heads", c.Heads)
	need("vocab_size", c.Vocab)
	if len(errs) > 0 {
		return nil, fmt.Errorf("config.json: %s", strings.Join(errs, "; "))
	}
	a := &Arch{
		Name: strings.ToLower(c.NameOrPath[strings.LastIndex(c.NameOrPath, "/")+1:]), ModelType: c.ModelType,
		Layers: c.Layers, Hidden: c.Hidden, QHeads: c.Heads, KVHeads: c.Heads,
		HeadDim: c.HeadDim, Intermediate: c.Intermediate, Vocab: c.Vocab,
		TiedEmbed: c.Tied, MaxContext: c.MaxPos,
	}
	if c.KVHeads != nil && *c.KVHeads > 0 {
		a.KVHeads = *c.KVHeads
	}
	if a.HeadDim == 0 {
		a.HeadDim = c.Hidden / c.Heads
	}
	if a.MaxContext == 0 {
		a.MaxContext = 4096
	}
	// YaRN stretches the trained context by its factor (Qwen2.5's and
	// Qwen3's long-context recipe); Llama-3's "llama3" scaling and
	// DeepSeek's YaRN already state the stretched length.
	if rs := c.RopeScaling; rs != nil && rs.Factor > 1 && (rs.Type == "yarn" || rs.RopeType == "yarn") {
		if base := cmpOr(rs.Original, c.MaxPos); base > 0 && int(float64(base)*rs.Factor) > a.MaxContext {
			a.MaxContext = int(float64(base) * rs.Factor)
		}
	}
	// Experts: each family names them its own way.
	a.Experts = max(c.LocalExperts, c.NumExperts, c.RoutedExperts)
	a.TopK = max(c.ExpertsPerTok, c.ExpertsPerToken)
	if a.Experts > 0 {
		a.MoEIntermediate = c.MoEIntermediate
		if a.MoEIntermediate == 0 {
			a.MoEIntermediate = c.Intermediate // Mixtral, GPT-OSS: one width
		}
		a.SharedWidth = c.SharedExperts*a.MoEIntermediate + c.SharedIntermediate
		a.MoELayers = moeLayers(&c)
		if a.TopK <= 0 || a.TopK > a.Experts {
			return nil, fmt.Errorf("config.json: num_experts_per_tok = %d with %d experts, expected 1..%d", a.TopK, a.Experts, a.Experts)
		}
	}
	if c.KVLoraRank > 0 {
		a.KVLoraRank, a.QLoraRank = c.KVLoraRank, c.QLoraRank
		a.QKNopeDim, a.QKRopeDim, a.VHeadDim = c.QKNopeDim, c.QKRopeDim, c.VHeadDim
		a.MTPLayers = c.NextN
	}
	a.SlidingWindow, a.SlidingLayers = slidingLayers(&c)
	a.SWAPool = a.SlidingLayers > 0 && sglangHybridSWA(c.Architectures)
	a.WeightDType, a.denseWeightBits, a.expertWeightBits = weightFormat(&c)
	return a, nil
}

// moeLayers counts the layers that carry experts: DeepSeek's first
// first_k_dense_replace layers are dense and then every moe_layer_freq-th;
// Qwen-MoE's every decoder_sparse_step-th except mlp_only_layers; Mixtral
// and GPT-OSS all.
func moeLayers(c *hfConfig) int {
	only := map[int]bool{}
	for _, l := range c.MLPOnlyLayers {
		only[l] = true
	}
	n := 0
	for i := 0; i < c.Layers; i++ {
		switch {
		case i < c.FirstKDense, only[i]:
			continue
		case c.MoELayerFreq > 1 && i%c.MoELayerFreq != 0:
			continue
		case c.SparseStep > 1 && (i+1)%c.SparseStep != 0:
			continue
		}
		n++
	}
	return n
}

// sglangHybridSWA is SGLang's is_hybrid_swa_model: the architectures it
// gives a separate sliding-window KV pool (python/sglang/srt/configs/
// model_config.py).
func sglangHybridSWA(archs []string) bool {
	for _, a := range archs {
		switch a {
		case "GptOssForCausalLM", "Llama4ForConditionalGeneration", "Gemma4ForCausalLM",
			"Gemma4ForConditionalGeneration", "MiMoV2FlashForCausalLM", "Step3p5ForCausalLM":
			return true
		}
	}
	return false
}

// slidingLayers is the window and how many layers use it: layer_types
// (GPT-OSS, Gemma-3) when given, else Mistral's one window for every layer,
// Qwen2's use_sliding_window with max_window_layers full-attention layers.
func slidingLayers(c *hfConfig) (window, layers int) {
	if c.SlidingWindow == nil || *c.SlidingWindow <= 0 {
		return 0, 0
	}
	w := *c.SlidingWindow
	if len(c.LayerTypes) > 0 {
		for _, t := range c.LayerTypes {
			if t == "sliding_attention" {
				layers++
			}
		}
		return w, layers
	}
	if c.UseSlidingWindow != nil {
		if !*c.UseSlidingWindow {
			return 0, 0
		}
		return w, max(c.Layers-c.MaxWindowLayers, 0)
	}
	if w >= c.MaxPos && c.MaxPos > 0 {
		return 0, 0 // a window as long as the context is none
	}
	return w, c.Layers
}

// weightFormat names the checkpoint's weight format and the bits a dense
// and an expert weight take: the torch dtype, or FP8 (DeepSeek-V3's
// block-quantised e4m3), or GPT-OSS's MXFP4 experts (4 bits + one 8-bit
// scale per 32 values = 4.25 bits) beside bf16 attention.
func weightFormat(c *hfConfig) (string, float64, float64) {
	dt := strings.ToLower(c.TorchDType + c.DType)
	bits := 16.0
	name := "bf16"
	switch {
	case strings.Contains(dt, "float32"):
		bits, name = 32, "fp32"
	case strings.Contains(dt, "float16") && !strings.Contains(dt, "bfloat16"):
		name = "fp16"
	}
	if q := c.Quantization; q != nil {
		switch strings.ToLower(q.Method) {
		case "fp8":
			return "fp8", 8, 8
		case "mxfp4":
			return "mxfp4-experts", bits, 4.25
		case "gptq", "awq":
			b := float64(cmpOr(q.Bits, 4))
			return strings.ToLower(q.Method), b, b
		}
	}
	return name, bits, bits
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// IsMLA reports whether the model caches a latent instead of per-head KV.
func (a *Arch) IsMLA() bool { return a.KVLoraRank > 0 }

// attnParamsPerLayer counts one layer's attention weights.
func (a *Arch) attnParamsPerLayer() int64 {
	h, n := int64(a.Hidden), int64(a.QHeads)
	if a.IsMLA() {
		qk := int64(a.QKNopeDim + a.QKRopeDim)
		var q int64
		if a.QLoraRank > 0 {
			q = h*int64(a.QLoraRank) + int64(a.QLoraRank)*n*qk
		} else {
			q = h * n * qk
		}
		kvA := h * int64(a.KVLoraRank+a.QKRopeDim)
		kvB := int64(a.KVLoraRank) * n * int64(a.QKNopeDim+a.VHeadDim)
		o := n * int64(a.VHeadDim) * h
		return q + kvA + kvB + o
	}
	d := int64(a.HeadDim)
	return h*n*d + 2*h*int64(a.KVHeads)*d + n*d*h
}

// Params is the parameter count split the way serving cost needs it:
// dense (attention, dense FFNs, shared experts, norms), routed experts,
// and the embedding and LM head.
type Params struct {
	Dense, Experts, Embed, LMHead int64
	// ActivePerToken is the weights one token's forward multiplies by
	// (dense + TopK experts per MoE layer + LM head), the FLOP count's base.
	ActivePerToken int64
}

// Params counts the model's parameters.
func (a *Arch) Params() Params {
	h := int64(a.Hidden)
	var p Params
	attn := a.attnParamsPerLayer()
	dense := int64(a.Layers-a.MoELayers) * 3 * h * int64(a.Intermediate)
	perExpert := 3 * h * int64(a.MoEIntermediate)
	moeL := int64(a.MoELayers)
	shared := moeL * 3 * h * int64(a.SharedWidth)
	router := moeL * h * int64(a.Experts)
	norms := int64(a.Layers) * 2 * h
	p.Dense = int64(a.Layers)*attn + dense + shared + router + norms
	p.Experts = moeL * int64(a.Experts) * perExpert
	p.Embed = int64(a.Vocab) * h
	if !a.TiedEmbed {
		p.LMHead = int64(a.Vocab) * h
	}
	p.ActivePerToken = p.Dense + moeL*int64(a.TopK)*perExpert + int64(a.Vocab)*h
	return p
}

// WeightBytes is what the checkpoint occupies in HBM, embedding and LM head
// included (MTP layers are not loaded for plain serving).
func (a *Arch) WeightBytes() int64 {
	p := a.Params()
	dense := float64(p.Dense+p.Embed+p.LMHead) * a.denseWeightBits / 8
	exp := float64(p.Experts) * a.expertWeightBits / 8
	return int64(dense + exp)
}

// ExpertBytes is the routed experts' share of WeightBytes.
func (a *Arch) ExpertBytes() int64 {
	return int64(float64(a.Params().Experts) * a.expertWeightBits / 8)
}

// KVElemsPerTokenLayer is what one token's cache holds in one layer, in
// elements, summed over all KV heads: 2·kv_heads·head_dim, or MLA's latent
// plus RoPE key (one copy for all heads).
func (a *Arch) KVElemsPerTokenLayer() int64 {
	if a.IsMLA() {
		return int64(a.KVLoraRank + a.QKRopeDim)
	}
	return 2 * int64(a.KVHeads) * int64(a.HeadDim)
}

// AttnFLOPsPerPair is the attention FLOPs of one query-key pair over all
// layers and heads: 2·head_dim for QKᵀ and 2·head_dim for PV per head.
func (a *Arch) AttnFLOPsPerPair() float64 {
	if a.IsMLA() {
		return 2 * float64(a.QHeads) * float64(a.QKNopeDim+a.QKRopeDim+a.VHeadDim) * float64(a.Layers)
	}
	return 4 * float64(a.QHeads) * float64(a.HeadDim) * float64(a.Layers)
}
