package model

import "fmt"

// Deployment is how a model is served on one worker: which GPU, how many
// of them as one tensor-parallel group, which engine sizes the KV pool and
// schedules, and the engine's own settings.
type Deployment struct {
	GPU GPU
	// TP GPUs hold one worker's weights split by tensor parallelism; each
	// layer's attention and FFN end in an all-reduce over ScaleUp.
	TP int
	// EP splits the routed experts over this many of the TP GPUs (0 or 1:
	// experts split by TP like every other weight); the MoE layer then
	// moves tokens by all-to-all instead of reducing its output.
	EP int
	// DPAttention runs attention data-parallel across the TP group (SGLang
	// --enable-dp-attention, vLLM's DP attention for MLA): each GPU keeps
	// whole KV for its own requests, so KV is never replicated, at the
	// price of replicated attention weights and an all-gather per layer.
	DPAttention bool
	// KVBits is the KV cache element width (16 bf16/fp16, 8 fp8).
	KVBits int
	// Engine is "vllm" or "sglang": the pool formula and the scheduler.
	Engine string
	// MemFraction is vLLM's gpu_memory_utilization or SGLang's
	// mem_fraction_static; 0 takes the engine's default.
	MemFraction float64
	// MaxBatchedTokens is vLLM's max_num_batched_tokens (or SGLang's
	// chunked_prefill_size); MaxSeqs vLLM's max_num_seqs (SGLang's
	// max_running_requests). 0 takes the engine's default.
	MaxBatchedTokens, MaxSeqs int
	// MaxModelLen caps the context (vLLM --max-model-len); 0 = the model's.
	MaxModelLen int
	// SWAFullTokensRatio is SGLang's --swa-full-tokens-ratio: the sliding
	// layers' pool holds this many tokens per token of the full layers'
	// (architectures with SGLang's separate SWA pool, Arch.SWAPool);
	// 0 takes SGLang's default 0.8.
	SWAFullTokensRatio float64
}

// Coefficients are the roofline's efficiency and fixed-overhead terms, the
// part a datasheet cannot give; `pdhybrid calibrate realruns` fits them.
type Coefficients struct {
	// GEMMEff is the share of dense peak a prefill's GEMMs reach.
	GEMMEff float64 `json:"gemm_eff"`
	// AttnEff is the share of dense peak prefill attention reaches.
	AttnEff float64 `json:"attn_eff"`
	// BWEff is the share of HBM bandwidth weight reads reach; KVBWEff the
	// share decode attention's KV reads reach (0 = BWEff).
	// ExpertBWEff the share a MoE layer's expert reads reach (0 = BWEff).
	BWEff       float64 `json:"bw_eff"`
	KVBWEff     float64 `json:"kv_bw_eff,omitempty"`
	ExpertBWEff float64 `json:"expert_bw_eff,omitempty"`
	// KVBWEffLarge is the share decode attention's KV reads reach in
	// batches of LargeBatch sequences or more (0 = KVBWEff): the
	// attention kernel's split over the context changes with the batch.
	KVBWEffLarge float64 `json:"kv_bw_eff_large,omitempty"`
	LargeBatch   int     `json:"large_batch,omitempty"`
	// AttnCTAShare is the share of HBM bandwidth one attention CTA draws
	// on its own: with it, a vLLM decode step on a GPU with SMs set pays
	// FlashAttention-3's tile schedule's tail (attntail.go); 0 = off.
	AttnCTAShare float64 `json:"attn_cta_share,omitempty"`
	// PrefillWeightRead is the share of the weight read charged to every
	// prefill step as fixed cost (a chunk's GEMMs only partly hide it).
	PrefillWeightRead float64 `json:"prefill_weight_read"`
	// StepS is a step's fixed scheduling, launch and sampling cost;
	// LayerS what each layer adds to every step (kernel launches and the
	// small kernels between GEMMs: norms, RoPE, KV stores).
	StepS  float64 `json:"step_s"`
	LayerS float64 `json:"layer_s,omitempty"`
	// PerSeqS is a decode sequence's own per-step cost (metadata, sampling).
	PerSeqS float64 `json:"per_seq_s"`
	// CollectiveS is the latency of one all-reduce (or all-to-all) call
	// per peer: a ring over t GPUs takes t − 1 latency-bound steps.
	CollectiveS float64 `json:"collective_s"`
	// LinkEff is the share of the scale-up link's bandwidth a collective's
	// payload moves at.
	LinkEff float64 `json:"link_eff"`
	// WorkspaceBytes is each GPU's memory outside weights and KV: the
	// engine's profiled activation peak (vLLM: one forward of
	// max_num_batched_tokens), CUDA context, cuBLAS buffers, allocator
	// slack; TPWorkspaceBytes what a GPU adds to it in a TP group (NCCL and
	// custom all-reduce buffers).
	WorkspaceBytes   int64  `json:"workspace_bytes"`
	TPWorkspaceBytes int64  `json:"tp_workspace_bytes"`
	Source           string `json:"-"`
}

// DefaultCoefficients are the ones fitted to the sixteen real vLLM runs
// on H100 SXM (`pdhybrid calibrate realruns`, 113 replays of every run,
// then GEMM and attention efficiency again with TTFT p99 in the objective:
// the runs' cold prefills of ~500 tokens pin them;
// calibration/realruns/h100-vllm-fit.json, docs/fidelity.md). Bandwidth
// efficiencies stopped at their bound 1 of the datasheet's 3.35 TB/s and
// the link's at 1 of 450 GB/s; the workspace terms reproduce the four
// models' logged KV pools within 0.08 %.
var DefaultCoefficients = Coefficients{
	GEMMEff: 0.7, AttnEff: 0.5422, BWEff: 1, KVBWEff: 1, ExpertBWEff: 0.85, PrefillWeightRead: 0.5,
	StepS: 1.1067e-3, LayerS: 20e-6, PerSeqS: 13.3e-6, CollectiveS: 5e-6, LinkEff: 1,
	WorkspaceBytes: 453e6, TPWorkspaceBytes: 500e6,
	Source: "fitted to 16 real vLLM runs on H100 SXM by pdhybrid calibrate realruns (calibration/realruns/h100-vllm-fit.json, docs/fidelity.md)",
}

// defaults fills an engine's own defaults.
func (d *Deployment) defaults(a *Arch) {
	if d.TP <= 0 {
		d.TP = 1
	}
	if d.EP < 1 {
		d.EP = 1
	}
	if d.KVBits == 0 {
		d.KVBits = 16
	}
	if d.Engine == "" {
		d.Engine = "sglang"
	}
	if d.MemFraction == 0 {
		if d.Engine == "vllm" {
			d.MemFraction = 0.9 // vLLM --gpu-memory-utilization default
		} else {
			d.MemFraction = 0.88 // SGLang's mem_fraction_static for ~80 GB GPUs at TP1 (server_args.py)
		}
	}
	if d.MaxBatchedTokens == 0 {
		if d.Engine == "vllm" {
			d.MaxBatchedTokens = 2048 // vLLM V1 online-serving default on a datacenter GPU below 70 GiB... see Sources
		} else {
			d.MaxBatchedTokens = 8192
		}
	}
	if d.MaxSeqs == 0 {
		if d.Engine == "vllm" {
			d.MaxSeqs = 256
		} else {
			d.MaxSeqs = 2048
		}
	}
	if d.MaxModelLen == 0 {
		d.MaxModelLen = a.MaxContext
	}
	if d.SWAFullTokensRatio == 0 {
		d.SWAFullTokensRatio = 0.8 // SGLang server_args.py swa_full_tokens_ratio
	}
}

// Validate checks a deployment against the model it serves.
func (d *Deployment) Validate(a *Arch) error {
	switch {
	case d.TP < 1 || d.TP > 64:
		return fmt.Errorf("tensor parallelism %d, expected 1..64", d.TP)
	case a.QHeads%d.TP != 0 && !d.DPAttention:
		return fmt.Errorf("tensor parallelism %d does not divide %s's %d attention heads", d.TP, a.Name, a.QHeads)
	case d.EP > 1 && (a.Experts == 0 || d.EP > d.TP || d.TP%d.EP != 0):
		return fmt.Errorf("expert parallelism %d: want a MoE model and a divisor of TP %d", d.EP, d.TP)
	case d.KVBits != 8 && d.KVBits != 16:
		return fmt.Errorf("KV cache element width %d bits, expected 16 (bf16/fp16) or 8 (fp8)", d.KVBits)
	case d.Engine != "vllm" && d.Engine != "sglang":
		return fmt.Errorf("engine %q, expected vllm or sglang", d.Engine)
	case !(d.MemFraction > 0 && d.MemFraction <= 1):
		return fmt.Errorf("memory fraction %v, expected in (0, 1]", d.MemFraction)
	case !(d.SWAFullTokensRatio > 0 && d.SWAFullTokensRatio <= 1):
		return fmt.Errorf("SWA-to-full tokens ratio %v, expected in (0, 1]", d.SWAFullTokensRatio)
	}
	return nil
}

// perGPU is what one GPU of the group holds and reads.
type perGPU struct {
	weights, expertWeights int64 // bytes resident
	kvPerToken             int64 // bytes of one token's KV on this GPU
	// poolPerToken is what one token of the pool takes on this GPU: the
	// KV of every layer, or under SGLang's SWA pool the full layers' KV
	// plus the ratio's share of the sliding layers' (swaPool).
	poolPerToken int64
	swaPool      bool
	kvReplicas   int     // GPUs holding a copy of the same KV
	activeFLOPs  float64 // GEMM FLOPs per token on this GPU
	attnFLOPs    float64 // attention FLOPs per query-key pair on this GPU
}

func (d *Deployment) split(a *Arch) perGPU {
	p := a.Params()
	t := float64(d.TP)
	var g perGPU
	attn := int64(a.Layers) * a.attnParamsPerLayer()
	denseBits := a.denseWeightBits
	expBytes := float64(a.ExpertBytes())
	other := float64(a.WeightBytes()) - expBytes
	if d.DPAttention {
		// Attention weights are whole on every GPU; the rest is split.
		attnB := float64(attn) * denseBits / 8
		other = attnB + (other-attnB)/t
	} else {
		other /= t
	}
	g.expertWeights = int64(expBytes / t) // EP or TP: each GPU holds 1/TP of the experts
	g.weights = int64(other) + g.expertWeights
	kvElems := a.KVElemsPerTokenLayer() * int64(a.Layers)
	kvBytes := kvElems * int64(d.KVBits) / 8
	switch {
	case d.DPAttention:
		g.kvPerToken, g.kvReplicas = kvBytes, 1
	case a.IsMLA():
		g.kvPerToken, g.kvReplicas = kvBytes, d.TP // the latent is replicated
	default:
		headsPer := max(a.KVHeads/d.TP, 1) // fewer KV heads than GPUs: replicated
		g.kvPerToken = int64(headsPer) * int64(a.Layers) * 2 * int64(a.HeadDim) * int64(d.KVBits) / 8
		g.kvReplicas = max(d.TP/a.KVHeads, 1)
	}
	g.poolPerToken = g.kvPerToken
	if d.Engine == "sglang" && a.SWAPool && a.SlidingLayers > 0 && a.SlidingLayers < a.Layers {
		// SGLang's set_num_tokens_hybrid_swa: full_tokens = memory /
		// (F·n_full + r·S·n_swa), the SWA pool r·full_tokens; the scheduler
		// counts the full pool. (All layers sliding: one pool of every
		// token, as before.) Sliding and full layers have one KV width here.
		perLayer := g.kvPerToken / int64(a.Layers)
		full, swa := int64(a.Layers-a.SlidingLayers)*perLayer, int64(a.SlidingLayers)*perLayer
		g.poolPerToken = full + int64(d.SWAFullTokensRatio*float64(swa))
		g.swaPool = true
	}
	g.activeFLOPs = 2 * float64(p.ActivePerToken) / t
	g.attnFLOPs = a.AttnFLOPsPerPair() / t
	return g
}

// PoolTokens is the engine's KV pool for this deployment, in tokens per
// worker (the same tokens on every GPU of the group), from the engine's
// own formula:
//
//	vLLM:   gpu_memory_utilization · total − weights − activation peak − non-torch memory
//	SGLang: mem_fraction_static · total − weights − workspace
//
// both as fraction · total − weights − workspace (− the TP buffers), the
// workspace holding vLLM's profiled activation peak; the pool is rounded
// down to whole blocks as vLLM's num_gpu_blocks is.
func (d Deployment) PoolTokens(a *Arch, c Coefficients, blockSize int) int64 {
	d.defaults(a)
	g := d.split(a)
	free := float64(d.GPU.UsableBytes)*d.MemFraction - float64(g.weights) - float64(c.WorkspaceBytes)
	if d.TP > 1 {
		free -= float64(c.TPWorkspaceBytes)
	}
	if free <= 0 || g.poolPerToken <= 0 {
		return 0
	}
	tokens := int64(free) / g.poolPerToken
	if d.DPAttention {
		tokens *= int64(d.TP) // each GPU holds its own requests' KV
	}
	if blockSize > 1 {
		tokens -= tokens % int64(blockSize)
	}
	return tokens
}

// Timing is the roofline's step-time model for this deployment in the
// engine model's linear form (model.Timing). Per token of a prefill chunk:
// its GEMM FLOPs at GEMMEff of peak, plus its share of the per-layer
// all-reduces' payload; per query-key pair: attention FLOPs at AttnEff; per
// step: StepS, the collectives' latency (two per layer), and
// PrefillWeightRead of one weight read. A decode step reads the dense
// weights once (the experts scaled by ExpertFraction), each sequence's KV,
// and pays StepS, PerSeqS and the payload per sequence.
func (d Deployment) Timing(a *Arch, c Coefficients) Timing {
	d.defaults(a)
	g := d.split(a)
	bw := d.GPU.HBMBandwidth * c.BWEff
	peak := d.GPU.Peak(a.denseWeightBits)
	var collLat, collPerTok float64
	if d.TP > 1 {
		calls := 2 * float64(a.Layers)
		collLat = calls * d.allReduceLatS(c)
		// Ring all-reduce: each GPU sends and receives 2(t−1)/t of the
		// payload (one bf16 hidden vector per token).
		t := float64(d.TP)
		vec := float64(a.Hidden) * 2
		bytes := calls * vec * 2 * (t - 1) / t
		if d.EP > 1 {
			// A MoE layer under EP moves each token to its top-k experts'
			// GPUs and back (two all-to-alls, (e−1)/e of it off-GPU)
			// instead of reducing the FFN's output.
			e, moe := float64(d.EP), float64(a.MoELayers)
			bytes += moe * (2*float64(a.TopK)*vec*(e-1)/e - vec*2*(t-1)/t)
		}
		collPerTok = bytes / (d.GPU.ScaleUpBandwidth * c.LinkEff)
	}
	collLat += float64(a.Layers) * c.LayerS
	denseRead := float64(g.weights-g.expertWeights) / bw
	expertRead := float64(g.expertWeights) / (d.GPU.HBMBandwidth * cmpOrF(c.ExpertBWEff, c.BWEff))
	tm := Timing{
		PrefillOverheadS:   c.StepS + collLat + c.PrefillWeightRead*(denseRead+expertRead),
		PrefillPerTokenS:   g.activeFLOPs/(peak*c.GEMMEff) + collPerTok,
		PrefillAttnS:       g.attnFLOPs / (peak * c.AttnEff),
		DecodeOverheadS:    c.StepS + collLat + denseRead,
		DecodePerSeqS:      c.PerSeqS + collPerTok + g.activeFLOPs/peak,
		DecodePerCtxTokenS: float64(g.kvPerToken) / (d.GPU.HBMBandwidth * cmpOrF(c.KVBWEff, c.BWEff)),
		DecodeExpertsS:     expertRead,
	}
	if c.KVBWEffLarge > 0 && c.LargeBatch > 0 {
		tm.DecodePerCtxTokenLargeS = float64(g.kvPerToken) / (d.GPU.HBMBandwidth * c.KVBWEffLarge)
		tm.LargeBatch = c.LargeBatch
	}
	if c.AttnCTAShare > 0 && d.Engine == "vllm" && d.GPU.SMs > 0 && !d.DPAttention && !a.IsMLA() && a.SlidingLayers == 0 {
		// vLLM's FlashAttention backend on Hopper runs FA3's varlen kernel
		// under full CUDA graphs with at most 16 splits
		// (_DEFAULT_MAX_NUM_SPLITS_FOR_CUDA_GRAPH in flash_attn.py).
		tm.AttnTiles = &AttnTiles{KVHeads: max(a.KVHeads/d.TP, 1), SMs: d.GPU.SMs,
			BlockN: fa3BlockN(a.HeadDim), MaxSplits: 16, CTAShare: c.AttnCTAShare}
	}
	if d.DPAttention {
		// Each GPU reads the whole KV of its own share of the batch.
		tm.DecodePerCtxTokenS /= float64(d.TP)
		tm.DecodePerCtxTokenLargeS /= float64(d.TP)
	}
	if a.Experts > 0 && a.TopK > 0 && d.Engine == "vllm" {
		// vLLM's fused MoE pads each expert's tokens to the tile height
		// (moepad.go); a padded row costs its expert GEMMs' FLOPs at peak,
		// as the real rows in DecodePerSeqS do.
		rowFLOPs := 2 * float64(a.Params().Experts) / float64(a.Experts) / float64(d.TP)
		tm.ExpertPadRowS = rowFLOPs / peak
		tm.ExpertTiles = vllmExpertTiles(a.Experts, a.MoEIntermediate/d.TP, d.GPU.Name)
	}
	if a.Experts == 0 {
		tm.DecodeOverheadS += expertRead
		tm.DecodeExpertsS = 0
	}
	if a.SlidingLayers > 0 && a.SlidingWindow > 0 {
		// Sliding-window layers read at most the window of each sequence,
		// the full-attention layers all of it: the full layers' share stays
		// per context token, the sliding layers' share is paid per token of
		// min(context, window) (the engine sums it over its batch).
		full := float64(a.Layers-a.SlidingLayers) / float64(a.Layers)
		tm.DecodePerWindowCtxTokenS = tm.DecodePerCtxTokenS * (1 - full)
		tm.SlidingWindow = a.SlidingWindow
		tm.DecodePerCtxTokenS *= full
		tm.DecodePerCtxTokenLargeS *= full
	}
	return tm
}

// allReduceLatS is one all-reduce's latency over the group's link: the
// link's own (base + per peer, from its source) where the GPU table gives
// one, else the per-peer latency fitted on NVLink.
func (d Deployment) allReduceLatS(c Coefficients) float64 {
	peers := float64(d.TP - 1)
	if d.GPU.ScaleUpPeerLatS > 0 {
		return d.GPU.ScaleUpBaseLatS + d.GPU.ScaleUpPeerLatS*peers
	}
	return c.CollectiveS * peers
}

func cmpOrF(a, b float64) float64 {
	if a > 0 {
		return a
	}
	return b
}

// Profile binds the model to the deployment as an engine profile: one
// worker is the whole TP group, so its HBM, weights, workspace and KV bytes
// per token are the group's sums (the pool per worker is then the per-GPU
// pool), and its links carry each GPU's share in parallel.
func (d Deployment) Profile(a *Arch, c Coefficients, blockSize int) (*Profile, error) {
	d.defaults(a)
	if err := d.Validate(a); err != nil {
		return nil, err
	}
	g := d.split(a)
	t := int64(d.TP)
	pool := d.PoolTokens(a, c, blockSize)
	if pool <= 0 {
		return nil, fmt.Errorf("%s on %d× %s: weights (%.1f GB per GPU) leave no KV pool at memory fraction %v of %.1f GB",
			a.Name, d.TP, d.GPU.Name, float64(g.weights)/1e9, d.MemFraction, float64(d.GPU.UsableBytes)/1e9)
	}
	groupKV, groupPool := g.kvPerToken*t, g.poolPerToken*t
	if d.DPAttention {
		groupKV, groupPool = g.kvPerToken, g.poolPerToken
	}
	kvBytes := max(d.KVBits/8, 1)
	elems := groupKV / int64(kvBytes) / int64(a.Layers) // = 2 · kv_heads · head_dim over the group
	hbm := int64(d.GPU.UsableBytes) * t
	weights := g.weights * t
	// Workspace: what the formula took besides weights, so that
	// Profile.KVPoolTokens reproduces pool at MemFraction.
	ws := int64(float64(hbm)*d.MemFraction) - weights - pool*groupPool
	name := fmt.Sprintf("%s/%s-tp%d", a.Name, d.GPU.Name, d.TP)
	p := &Profile{
		Name: name,
		Model: Model{Name: a.Name, Layers: a.Layers, QHeads: a.QHeads, KVHeads: int(elems / 2), HeadDim: 1,
			DTypeBytes: kvBytes, MaxContext: d.MaxModelLen, Experts: a.Experts, TopK: a.TopK, WeightBytes: weights},
		Hardware: Hardware{Name: fmt.Sprintf("%s-tp%d", d.GPU.Name, d.TP), HBMBytes: hbm, MemFraction: d.MemFraction, WorkspaceBytes: ws},
		Timing:   d.Timing(a, c),
		Links:    d.links(),
		Server:   &Server{MaxRunningRequests: d.MaxSeqs, ChunkedPrefillSize: d.MaxBatchedTokens, Scheduler: d.Engine},
	}
	if g.swaPool {
		p.Model.PoolBytesPerToken = groupPool
		if p.Timing.SlidingWindow > 0 {
			p.Model.SWAPoolRatio = d.SWAFullTokensRatio
		}
	}
	if p.Timing.SlidingWindow > 0 {
		p.Model.SlidingLayers = a.SlidingLayers
	}
	if elems%2 != 0 {
		return nil, fmt.Errorf("%s: KV width %d elements per layer is odd; cannot express it as 2·kv_heads·head_dim", a.Name, elems)
	}
	p.Sources = d.sources(a, c, g, pool)
	if g.swaPool {
		p.Sources["model.pool_bytes_per_token"] = fmt.Sprintf("SGLang's SWA pool (set_num_tokens_hybrid_swa, python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py): the scheduler counts the %d full-attention layers' tokens and the %d sliding layers' pool holds --swa-full-tokens-ratio %v of them, so a pool token costs the full layers' KV plus that share of the sliding layers' (%d bytes over the group; every layer's is %d)",
			a.Layers-a.SlidingLayers, a.SlidingLayers, d.SWAFullTokensRatio, groupPool, groupKV)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return p, nil
}

// latencySource says where the all-reduce latency came from.
func (d Deployment) latencySource(c Coefficients) string {
	if d.GPU.ScaleUpPeerLatS > 0 {
		return fmt.Sprintf("%.1f us + %.1f us per peer over %s (its source in hardware)", d.GPU.ScaleUpBaseLatS*1e6, d.GPU.ScaleUpPeerLatS*1e6, d.GPU.ScaleUpName)
	}
	return fmt.Sprintf("%.1f us per peer (fitted on NVLink)", c.CollectiveS*1e6)
}

// links: every GPU of the group has its own NIC and scale-up port, so a
// worker's transfer bandwidth is TP times one GPU's.
func (d Deployment) links() map[string]Link {
	t := float64(d.TP)
	return map[string]Link{
		"rdma-400g":    {Name: "rdma-400g", SetupS: 1e-4, BandwidthBytes: 37.5e9 * t},
		"tcp-loopback": {Name: "tcp-loopback", SetupS: 1e-3, BandwidthBytes: 1.5e9},
		"nvlink":       {Name: "nvlink", SetupS: 3e-5, BandwidthBytes: d.GPU.ScaleUpBandwidth * 0.9 * t},
	}
}

func (d Deployment) sources(a *Arch, c Coefficients, g perGPU, pool int64) map[string]string {
	p := a.Params()
	fit := "coefficients: " + c.Source
	if c.KVBWEffLarge > 0 && c.LargeBatch > 0 {
		fit = fmt.Sprintf("KV reads at %.3f of HBM in batches of %d or more; %s", c.KVBWEffLarge, c.LargeBatch, fit)
	}
	if c.AttnCTAShare > 0 {
		fit = fmt.Sprintf("decode attention's FA3 tile-schedule tail with one CTA drawing %.4g of HBM (%d SMs; where vLLM runs FA3); %s", c.AttnCTAShare, d.GPU.SMs, fit)
	}
	return map[string]string{
		"model": fmt.Sprintf("Hugging Face config.json (%s): %d layers, hidden %d, %d query / %d KV heads, head dim %d, %d experts top-%d (%d MoE layers, shared width %d), MLA latent %d+%d, sliding window %d on %d layers; %.2f B parameters (%.2f B active per token), weights %s",
			a.ModelType, a.Layers, a.Hidden, a.QHeads, a.KVHeads, a.HeadDim, a.Experts, a.TopK, a.MoELayers, a.SharedWidth, a.KVLoraRank, a.QKRopeDim, a.SlidingWindow, a.SlidingLayers,
			float64(p.Dense+p.Experts+p.Embed+p.LMHead)/1e9, float64(p.ActivePerToken)/1e9, a.WeightDType),
		"model.kv_heads":        fmt.Sprintf("KV elements per token per layer summed over the %d GPUs of the group (replicated where KV heads < TP or MLA's latent), as 2·kv_heads·head_dim with head_dim 1; %d KV bits", d.TP, d.KVBits),
		"model.weight_bytes":    fmt.Sprintf("%.2f GB per GPU × %d GPUs (replicated parts counted on each)", float64(g.weights)/1e9, d.TP),
		"hardware":              d.GPU.Source,
		"hardware.mem_fraction": fmt.Sprintf("%s memory fraction %v (vLLM gpu_memory_utilization / SGLang mem_fraction_static)", d.Engine, d.MemFraction),
		"hardware.workspace_bytes": fmt.Sprintf("what the %s pool formula takes besides weights and KV: workspace %.3f GB per GPU (+%.3f GB per GPU at TP > 1); pool %d tokens per worker; %s",
			d.Engine, float64(c.WorkspaceBytes)/1e9, float64(c.TPWorkspaceBytes)/1e9, pool, fit),
		"timing": fmt.Sprintf("roofline on the %s datasheet (dense peak %.0f TFLOP/s, HBM %.2f TB/s, %s %.0f GB/s per direction), TP %d with two all-reduces per layer: GEMM efficiency %.3f, attention %.3f, HBM %.3f (KV reads %.3f, expert reads %.3f), link %.3f, all-reduce latency %s, step %.2f ms + %.1f us per layer, per-sequence %.1f us, prefill weight-read share %.2f; %s",
			d.GPU.Name, d.GPU.Peak(a.denseWeightBits)/1e12, d.GPU.HBMBandwidth/1e12, d.GPU.ScaleUpName, d.GPU.ScaleUpBandwidth/1e9, d.TP,
			c.GEMMEff, c.AttnEff, c.BWEff, cmpOrF(c.KVBWEff, c.BWEff), cmpOrF(c.ExpertBWEff, c.BWEff), c.LinkEff, d.latencySource(c), c.StepS*1e3, c.LayerS*1e6, c.PerSeqS*1e6, c.PrefillWeightRead, fit),
		"server":       fmt.Sprintf("%s scheduler: max %d running sequences, %d batched tokens per step", d.Engine, d.MaxSeqs, d.MaxBatchedTokens),
		"links.nvlink": fmt.Sprintf("%s datasheet bandwidth at 90 %% × %d GPUs", d.GPU.ScaleUpName, d.TP),
	}
}
