package model

import "math"

// ExpertTile is one row of a fused-MoE kernel's tile-height rule: batches of
// up to UpTo tokens run with tiles of BlockM rows.
type ExpertTile struct {
	UpTo   int `json:"up_to_tokens"`
	BlockM int `json:"block_m"`
}

// BlockM is the fused-MoE tile height for a step of tokens tokens: the
// first tile whose UpTo covers it, the last beyond them all; 0 when the
// profile has no rule.
func (t Timing) BlockM(tokens int) int {
	for _, r := range t.ExpertTiles {
		if tokens <= r.UpTo {
			return r.BlockM
		}
	}
	if n := len(t.ExpertTiles); n > 0 {
		return t.ExpertTiles[n-1].BlockM
	}
	return 0
}

// PaddedExpertRows is the expected number of rows a fused-MoE kernel
// computes per MoE layer for a step of tokens tokens, when each token is
// routed to TopK of the Experts experts uniformly and the kernel pads each
// expert's tokens to a multiple of blockM (vLLM's and SGLang's
// moe_align_block_size): Σ_e E[⌈c_e/blockM⌉·blockM] with c_e ~
// Binomial(tokens, TopK/Experts), which is exactly each expert's marginal
// count whatever the correlation between experts. A dense model, or
// blockM < 2, gives tokens·TopK (no padding).
func (m Model) PaddedExpertRows(tokens, blockM int) float64 {
	if m.Experts <= 0 || m.TopK <= 0 || tokens <= 0 {
		return 0
	}
	real := float64(tokens) * float64(m.TopK)
	if blockM < 2 {
		return real
	}
	p := float64(m.TopK) / float64(m.Experts)
	if p >= 1 {
		return float64(m.Experts) * float64(ceilTo(tokens, blockM))
	}
	// E[⌈c/b⌉·b] = Σ_c pmf(c)·⌈c/b⌉·b, the pmf in log space (tokens can be
	// thousands).
	var e float64
	lp, lq := math.Log(p), math.Log1p(-p)
	lgN, _ := math.Lgamma(float64(tokens) + 1)
	for c := 1; c <= tokens; c++ {
		lgC, _ := math.Lgamma(float64(c) + 1)
		lgR, _ := math.Lgamma(float64(tokens-c) + 1)
		pmf := math.Exp(lgN - lgC - lgR + float64(c)*lp + float64(tokens-c)*lq)
		e += pmf * float64(ceilTo(c, blockM))
	}
	return float64(m.Experts) * e
}

func ceilTo(n, b int) int { return (n + b - 1) / b * b }

// ExpertPaddingS is what a decode step of batch sequences pays for the
// fused-MoE kernel's padded rows. The kernel streams each hit expert's
// weights once per tile of rows, so its time is the larger of that read and
// its padded rows' FLOPs; the step already charges the read
// (DecodeExpertsS·ExpertFraction) and the real rows' FLOPs (in
// DecodePerSeqS), so the padding costs only what the padded rows' FLOPs
// exceed both by. 0 without a tile rule or for a dense model.
func (t Timing) ExpertPaddingS(m Model, batch int) float64 {
	if t.ExpertPadRowS <= 0 || batch <= 0 {
		return 0
	}
	bm := t.BlockM(batch)
	padded := t.ExpertPadRowS * m.PaddedExpertRows(batch, bm)
	charged := t.DecodeExpertsS*m.ExpertFraction(batch) + t.ExpertPadRowS*float64(batch)*float64(m.TopK)
	return max(padded-charged, 0)
}

// vllmExpertTiles is vLLM's fused-MoE tile height by batch for a shape: the
// tuned table where vLLM ships one for this shape and GPU, else its
// get_default_config rule for bf16 weights (BLOCK_SIZE_M 16 while the
// tokens do not outnumber the experts, 64 beyond). docs/fidelity.md cites
// the files and the commit.
func vllmExpertTiles(experts, shardN int, gpu string) []ExpertTile {
	if experts == 8 && shardN == 7168 && gpu == "h100-sxm" {
		// configs/E=8,N=7168,device_name=NVIDIA_H100_80GB_HBM3.json, keys
		// 1..4096 picked by the nearest key (ties to the smaller key):
		// 1–32 → 16, 48–96 → 32, 128–512 → 64, 1024– → 128.
		return []ExpertTile{{40, 16}, {112, 32}, {768, 64}, {math.MaxInt32, 128}}
	}
	return []ExpertTile{{experts, 16}, {math.MaxInt32, 64}}
}
