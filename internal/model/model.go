// Package model describes what the engine model needs to know about a served
// model and the hardware under it: KV bytes per token, KV pool size, prefill
// and decode-step timing, and the links KV travels over. A Profile is data:
// built-in profiles are embedded JSON files, and users bring their own with
// Load. Every built-in number names its source in the profile's Sources map.
package model

import (
	"fmt"
	"math"
)

// Model is the shape of a transformer as far as serving cost goes.
type Model struct {
	Name       string `json:"name"`
	Layers     int    `json:"layers"`
	QHeads     int    `json:"q_heads"`
	KVHeads    int    `json:"kv_heads"`
	HeadDim    int    `json:"head_dim"`
	DTypeBytes int    `json:"dtype_bytes"` // bytes per KV element (bf16 = 2)
	MaxContext int    `json:"max_context"` // tokens
	// Experts and TopK describe a mixture-of-experts FFN (0 for dense models).
	Experts     int   `json:"experts,omitempty"`
	TopK        int   `json:"top_k,omitempty"`
	WeightBytes int64 `json:"weight_bytes"` // resident weights on one GPU (TP1)
	// PoolBytesPerToken, when set, is what one token of the KV pool takes
	// where it differs from KVBytesPerToken: SGLang's SWA pool counts the
	// full-attention layers' tokens and sizes the sliding layers' pool at
	// a ratio of them (--swa-full-tokens-ratio), so a pool token costs the
	// full layers' KV plus that share of the sliding layers'. 0: the KV of
	// every layer.
	PoolBytesPerToken int64 `json:"pool_bytes_per_token,omitempty"`
	// SlidingLayers is how many of Layers attend only within
	// Timing.SlidingWindow: their KV behind the window is never read again,
	// and vLLM frees its blocks while the request runs
	// (engine/windowfree.go). 0: every layer attends over the whole context.
	SlidingLayers int `json:"sliding_layers,omitempty"`
	// SWAPoolRatio is the tokens SGLang's separate sliding-window pool
	// holds per pool token (its --swa-full-tokens-ratio; the pool counts
	// the full layers' tokens, PoolBytesPerToken): the engine keeps a
	// second bound on what running requests hold of their windows
	// (engine/swapool.go). 0: no separate pool.
	SWAPoolRatio float64 `json:"swa_pool_ratio,omitempty"`
}

// PoolBytes is what one token of the KV pool takes.
func (m Model) PoolBytes() int64 {
	if m.PoolBytesPerToken > 0 {
		return m.PoolBytesPerToken
	}
	return m.KVBytesPerToken()
}

// KVBytesPerToken is 2 (K and V) · layers · kv_heads · head_dim · dtype bytes.
func (m Model) KVBytesPerToken() int64 {
	return 2 * int64(m.Layers) * int64(m.KVHeads) * int64(m.HeadDim) * int64(m.DTypeBytes)
}

// ExpertFraction is the expected share of experts a decode step over batch
// sequences touches, per layer: 1 − (1 − k/E)^batch. It is why a small MoE
// decode batch costs less than a large one even though every token reads the
// attention weights: each new sequence pulls in more expert weights until all
// are read. Dense models return 1.
func (m Model) ExpertFraction(batch int) float64 {
	if m.Experts <= 0 || m.TopK <= 0 {
		return 1
	}
	if batch <= 0 {
		return 0
	}
	return 1 - math.Pow(1-float64(m.TopK)/float64(m.Experts), float64(batch))
}

// Hardware is one GPU as the KV pool sees it.
type Hardware struct {
	Name        string  `json:"name"`
	HBMBytes    int64   `json:"hbm_bytes"`
	MemFraction float64 `json:"mem_fraction"` // share of HBM the server may use (SGLang --mem-fraction-static)
	// WorkspaceBytes is what the server keeps besides weights and KV:
	// activations, CUDA graphs, allocator slack.
	WorkspaceBytes int64 `json:"workspace_bytes"`
}

// Timing holds the engine model's cost coefficients, all in seconds.
//
// A scheduler step that runs prefill chunks (n_i new tokens after p_i cached
// ones) together with a decode batch of B sequences holding C context tokens
// in all costs
//
//	step = overhead + Σ_i (PrefillPerToken·n_i + PrefillAttn·n_i·(p_i + n_i/2))
//	     + DecodePerSeq·B + DecodePerCtxToken·C + DecodeExperts·ExpertFraction(B)
//
// where overhead is PrefillOverhead + PrefillEager when the step holds any
// prefill work and DecodeOverhead otherwise. A step's cost is the sum over
// its composition, not a flat per-token constant.
type Timing struct {
	PrefillOverheadS float64 `json:"prefill_overhead_s"`
	// PrefillEagerS is what a step with prefill work (a prefill or mixed
	// step) costs beyond the CUDA-graph time the other terms were fitted
	// to, because the engine runs it eagerly: SGLang runs extend batches
	// without CUDA graphs (unless piecewise graphs are on) and replays
	// graphs for decode only. 0 where the fit already saw the engine's
	// own steps (the roofline fitted to real vLLM runs).
	PrefillEagerS      float64 `json:"prefill_eager_s,omitempty"`
	PrefillPerTokenS   float64 `json:"prefill_per_token_s"`
	PrefillAttnS       float64 `json:"prefill_attn_s"` // per token pair n·(p+n/2)
	DecodeOverheadS    float64 `json:"decode_overhead_s"`
	DecodePerSeqS      float64 `json:"decode_per_seq_s"`
	DecodePerCtxTokenS float64 `json:"decode_per_ctx_token_s"`
	DecodeExpertsS     float64 `json:"decode_experts_s"` // cost of reading every expert once
	// DecodePerCtxTokenLargeS is the per-context-token cost for batches of
	// LargeBatch sequences or more, where the measured decode attention
	// reads context at a different rate (35–40 ns/token against 22–25 below
	// on the H200); 0 (or LargeBatch 0) keeps one slope for every batch.
	DecodePerCtxTokenLargeS float64 `json:"decode_per_ctx_token_large_batch_s,omitempty"`
	LargeBatch              int     `json:"large_batch,omitempty"`
	// DecodePerWindowCtxTokenS is the sliding-window layers' decode cost
	// per context token, paid on at most SlidingWindow tokens of each
	// sequence (the window those layers attend over; the engine sums
	// min(context, window) over its batch); DecodePerCtxTokenS then holds
	// the full-attention layers' share alone. 0: no sliding layers.
	DecodePerWindowCtxTokenS float64 `json:"decode_per_window_ctx_token_s,omitempty"`
	SlidingWindow            int     `json:"sliding_window,omitempty"`
	// ExpertPadRowS is what one padded row of the fused-MoE kernel adds to
	// a decode step (its expert GEMM FLOPs over every MoE layer), and
	// ExpertTiles the kernel's tile height by batch: each expert's tokens
	// are padded to a multiple of it (moepad.go). 0 / none: not charged
	// (profiles fitted to measured steps already hold it).
	ExpertPadRowS float64      `json:"decode_expert_pad_row_s,omitempty"`
	ExpertTiles   []ExpertTile `json:"expert_tiles,omitempty"`
	// AttnTiles, when set, charges decode attention's tile-schedule tail
	// (FlashAttention-3's varlen scheduler, attntail.go) from the batch's
	// per-sequence contexts; nil: the linear context term alone.
	AttnTiles *AttnTiles `json:"attn_tiles,omitempty"`
}

// CtxSlope is the decode cost per context token for a batch of this size.
func (t Timing) CtxSlope(batch int) float64 {
	if t.LargeBatch > 0 && batch >= t.LargeBatch && t.DecodePerCtxTokenLargeS > 0 {
		return t.DecodePerCtxTokenLargeS
	}
	return t.DecodePerCtxTokenS
}

// WindowedCtx is what the sliding-window layers read of a sequence of
// ctx tokens: at most the window (all of it without sliding layers).
func (t Timing) WindowedCtx(ctx int) int {
	if t.SlidingWindow > 0 && ctx > t.SlidingWindow {
		return t.SlidingWindow
	}
	return ctx
}

// PrefillStepS is the fixed cost of a step with prefill work: its overhead
// and, where the engine runs such steps eagerly, the eager launch cost.
func (t Timing) PrefillStepS() float64 { return t.PrefillOverheadS + t.PrefillEagerS }

// PrefillS is the time to prefill n new tokens after p cached ones alone.
func (t Timing) PrefillS(n, p int) float64 {
	if n <= 0 {
		return 0
	}
	return t.PrefillStepS() + t.PrefillWorkS(n, p)
}

// PrefillWorkS is the prefill cost of one chunk without the step overhead.
func (t Timing) PrefillWorkS(n, p int) float64 {
	fn := float64(n)
	return t.PrefillPerTokenS*fn + t.PrefillAttnS*fn*(float64(p)+fn/2)
}

// DecodeWorkS is the decode part of a step without the overhead.
func (t Timing) DecodeWorkS(m Model, batch int, ctxTokens int64) float64 {
	if batch <= 0 {
		return 0
	}
	return t.DecodePerSeqS*float64(batch) + t.CtxSlope(batch)*float64(ctxTokens) +
		t.DecodeExpertsS*m.ExpertFraction(batch) + t.ExpertPaddingS(m, batch)
}

// DecodeStepS is one decode step for batch sequences with ctxTokens context
// in total, with no prefill in the step.
func (t Timing) DecodeStepS(m Model, batch int, ctxTokens int64) float64 {
	if batch <= 0 {
		return 0
	}
	return t.DecodeOverheadS + t.DecodeWorkS(m, batch, ctxTokens)
}

// Link is a KV transfer path: a setup latency plus bytes over an effective
// bandwidth, shared by transfers in flight at the same time.
type Link struct {
	Name           string  `json:"name"`
	SetupS         float64 `json:"setup_s"`
	BandwidthBytes float64 `json:"bandwidth_bytes_per_s"`
}

// TransferS is the time to move bytes alone on the link.
func (l Link) TransferS(bytes int64) float64 {
	if bytes <= 0 {
		return 0
	}
	return l.SetupS + float64(bytes)/l.BandwidthBytes
}

// Server holds the serving engine's own limits for this model on this
// hardware: what SGLang chooses when started without the flags. Zero means
// not stated (the simulator keeps its own default).
type Server struct {
	// MaxRunningRequests caps the requests a worker runs at once, the decode
	// batch included (SGLang --max-running-requests).
	MaxRunningRequests int `json:"max_running_requests,omitempty"`
	// ChunkedPrefillSize is the most new tokens one prefill chunk carries
	// (SGLang --chunked-prefill-size).
	ChunkedPrefillSize int `json:"chunked_prefill_size,omitempty"`
	// CUDAGraphMaxBatch is the largest decode batch replayed from a CUDA
	// graph (SGLang --cuda-graph-max-bs); larger batches run eagerly.
	CUDAGraphMaxBatch int `json:"cuda_graph_max_bs,omitempty"`
	// Scheduler is the engine whose scheduling rules the worker follows:
	// "" or "sglang" (prefill first), "vllm" (V1: one token budget per
	// step, decodes first; internal/engine/vllm.go).
	Scheduler string `json:"scheduler,omitempty"`
}

// Profile binds a model to hardware with its timing and links.
type Profile struct {
	Name     string          `json:"name"`
	Model    Model           `json:"model"`
	Hardware Hardware        `json:"hardware"`
	Timing   Timing          `json:"timing"`
	Links    map[string]Link `json:"links"`
	// Server is optional: profiles without it load as before.
	Server *Server `json:"server,omitempty"`
	// Sources says where each number came from, keyed by field path
	// ("timing.prefill_per_token_s", "hardware.workspace_bytes", ...).
	Sources map[string]string `json:"sources"`
}

// KVPoolTokens is the KV pool size at the profile's memory fraction:
// (HBM · mem_fraction − weights − workspace) / KV bytes per token.
func (p *Profile) KVPoolTokens(memFraction float64) int64 {
	if memFraction <= 0 {
		memFraction = p.Hardware.MemFraction
	}
	free := int64(float64(p.Hardware.HBMBytes)*memFraction) - p.Model.WeightBytes - p.Hardware.WorkspaceBytes
	per := p.Model.PoolBytes()
	if free <= 0 || per <= 0 {
		return 0
	}
	return free / per
}

// Validate checks that the profile can drive a simulation.
func (p *Profile) Validate() error {
	var errs []string
	pos := func(name string, v float64) {
		if !(v > 0) {
			errs = append(errs, fmt.Sprintf("%s = %v, expected > 0", name, v))
		}
	}
	nonneg := func(name string, v float64) {
		if v < 0 || math.IsNaN(v) {
			errs = append(errs, fmt.Sprintf("%s = %v, expected ≥ 0", name, v))
		}
	}
	pos("model.layers", float64(p.Model.Layers))
	pos("model.kv_heads", float64(p.Model.KVHeads))
	pos("model.head_dim", float64(p.Model.HeadDim))
	pos("model.dtype_bytes", float64(p.Model.DTypeBytes))
	nonneg("model.pool_bytes_per_token", float64(p.Model.PoolBytesPerToken))
	if r := p.Model.SWAPoolRatio; r < 0 || r > 1 || math.IsNaN(r) || (r > 0 && p.Timing.SlidingWindow <= 0) {
		errs = append(errs, fmt.Sprintf("model.swa_pool_ratio = %v with timing.sliding_window %d: want 0 (no sliding pool) or a ratio in (0, 1] with a window", r, p.Timing.SlidingWindow))
	}
	if n := p.Model.SlidingLayers; n < 0 || n > p.Model.Layers || (n > 0 && p.Timing.SlidingWindow <= 0) {
		errs = append(errs, fmt.Sprintf("model.sliding_layers = %d with model.layers %d and timing.sliding_window %d: want 0..layers, and a window when > 0", n, p.Model.Layers, p.Timing.SlidingWindow))
	}
	pos("hardware.hbm_bytes", float64(p.Hardware.HBMBytes))
	if p.Hardware.MemFraction <= 0 || p.Hardware.MemFraction > 1 {
		errs = append(errs, fmt.Sprintf("hardware.mem_fraction = %v, expected in (0, 1]", p.Hardware.MemFraction))
	}
	nonneg("timing.prefill_overhead_s", p.Timing.PrefillOverheadS)
	nonneg("timing.prefill_eager_s", p.Timing.PrefillEagerS)
	pos("timing.prefill_per_token_s", p.Timing.PrefillPerTokenS)
	nonneg("timing.prefill_attn_s", p.Timing.PrefillAttnS)
	nonneg("timing.decode_overhead_s", p.Timing.DecodeOverheadS)
	nonneg("timing.decode_per_seq_s", p.Timing.DecodePerSeqS)
	nonneg("timing.decode_per_ctx_token_s", p.Timing.DecodePerCtxTokenS)
	nonneg("timing.decode_per_ctx_token_large_batch_s", p.Timing.DecodePerCtxTokenLargeS)
	nonneg("timing.large_batch", float64(p.Timing.LargeBatch))
	nonneg("timing.decode_per_window_ctx_token_s", p.Timing.DecodePerWindowCtxTokenS)
	nonneg("timing.sliding_window", float64(p.Timing.SlidingWindow))
	if (p.Timing.DecodePerWindowCtxTokenS > 0) != (p.Timing.SlidingWindow > 0) {
		errs = append(errs, fmt.Sprintf("timing.decode_per_window_ctx_token_s %v with timing.sliding_window %d: want both set or neither", p.Timing.DecodePerWindowCtxTokenS, p.Timing.SlidingWindow))
	}
	nonneg("timing.decode_experts_s", p.Timing.DecodeExpertsS)
	nonneg("timing.decode_expert_pad_row_s", p.Timing.ExpertPadRowS)
	for i, r := range p.Timing.ExpertTiles {
		if r.UpTo < 1 || r.BlockM < 1 || (i > 0 && r.UpTo <= p.Timing.ExpertTiles[i-1].UpTo) {
			errs = append(errs, fmt.Sprintf("timing.expert_tiles[%d]: up_to_tokens %d, block_m %d; want both ≥ 1 and up_to_tokens rising", i, r.UpTo, r.BlockM))
		}
	}
	if a := p.Timing.AttnTiles; a != nil && (a.KVHeads < 1 || a.SMs < 1 || a.BlockN < 1 || a.MaxSplits < 1 || !(a.CTAShare > 0 && a.CTAShare <= 1)) {
		errs = append(errs, fmt.Sprintf("timing.attn_tiles: kv_heads_per_gpu %d, sms %d, block_n %d, max_splits %d, cta_share %v; want the counts ≥ 1 and cta_share in (0, 1]",
			a.KVHeads, a.SMs, a.BlockN, a.MaxSplits, a.CTAShare))
	}
	if p.Timing.DecodeOverheadS+p.Timing.DecodePerSeqS <= 0 {
		errs = append(errs, "timing: a decode step must cost something (decode_overhead_s + decode_per_seq_s > 0)")
	}
	if s := p.Server; s != nil {
		nonneg("server.max_running_requests", float64(s.MaxRunningRequests))
		nonneg("server.chunked_prefill_size", float64(s.ChunkedPrefillSize))
		nonneg("server.cuda_graph_max_bs", float64(s.CUDAGraphMaxBatch))
		if s.Scheduler != "" && s.Scheduler != "sglang" && s.Scheduler != "vllm" {
			errs = append(errs, fmt.Sprintf("server.scheduler = %q, expected sglang or vllm", s.Scheduler))
		}
	}
	for name, l := range p.Links {
		nonneg("links."+name+".setup_s", l.SetupS)
		pos("links."+name+".bandwidth_bytes_per_s", l.BandwidthBytes)
	}
	if p.KVPoolTokens(0) <= 0 {
		errs = append(errs, "hardware: HBM·mem_fraction leaves no room for KV after weights and workspace")
	}
	if len(errs) > 0 {
		return fmt.Errorf("profile %s: %v", p.Name, errs)
	}
	return nil
}
