package model

import "math"

// AttnTiles is how FlashAttention-3's varlen forward kernel (the one vLLM's
// FlashAttention backend runs on Hopper) lays a decode batch's attention
// onto the GPU, from its source (vllm-project/flash-attention, hopper/;
// docs/fidelity.md cites files and commits):
//
//   - each sequence is cut into ⌈context/BlockN⌉ key blocks; with PackGQA
//     (always on for decode) one work tile is one (sequence, KV head,
//     split) — every query head of a KV head rides in the same tile;
//   - the number of splits per sequence is chosen per batch
//     (flash_prepare_scheduler.cu): blocks_per_sm = ⌈1.1·Σ blocks·heads /
//     SMs⌉, splits = clamp(⌈blocks/blocks_per_sm⌉, 1, MaxSplits), so a
//     large batch runs every sequence unsplit;
//   - one persistent CTA per SM takes the next tile in order when it goes
//     idle (VarlenDynamicPersistentTileScheduler, tile_scheduler.hpp):
//     batches in groups of 31, each group's heads in turn; tiles are not
//     sorted by length.
//
// So the kernel ends when the most loaded CTA does: a long sequence among
// short ones, or too few tiles for the SMs, leaves SMs idle at the end.
// CTAShare is the share of HBM bandwidth one CTA can draw on its own (the
// fitted part); the step's attention then costs at least the list
// schedule's makespan at that rate, besides the bandwidth bound the linear
// context term already charges.
type AttnTiles struct {
	KVHeads   int     `json:"kv_heads_per_gpu"`
	SMs       int     `json:"sms"`
	BlockN    int     `json:"block_n"`
	MaxSplits int     `json:"max_splits"`
	CTAShare  float64 `json:"cta_share"`
}

// fa3MaxBatch1CTA is the largest batch FA3's prepare kernel splits
// dynamically (PREPARE_VARLEN_MAX_BATCHES_1CTA, 992): beyond it every
// sequence runs unsplit.
const fa3MaxBatch1CTA = 992

// fa3GroupBatches is how many batches the tile scheduler walks at a time
// (one warp's lanes less one, NumThreadsPerWarp − 1).
const fa3GroupBatches = 31

// fa3BlockN is FA3's key-block width for a causal decode on Hopper
// (tile_size_fwd_sm90 with one MMA warpgroup, 16-bit KV).
func fa3BlockN(headDim int) int {
	switch {
	case headDim <= 64:
		return 192
	case headDim <= 128:
		return 128
	case headDim <= 192:
		return 96
	default:
		return 80
	}
}

// Splits is FA3's dynamic split count for each sequence of a decode batch
// with these contexts (flash_prepare_scheduler.cu), written into out.
func (a *AttnTiles) Splits(ctxs []int, out []int) []int {
	out = out[:0]
	total := 0
	for _, c := range ctxs {
		total += ceilDiv(c, a.BlockN)
	}
	bps := int(math.Ceil(float64(total) * 1.1 * float64(a.KVHeads) / float64(a.SMs)))
	for _, c := range ctxs {
		s := 1
		if len(ctxs) <= fa3MaxBatch1CTA && a.MaxSplits > 1 && bps > 0 {
			s = max(min(ceilDiv(ceilDiv(c, a.BlockN), bps), a.MaxSplits), 1)
		}
		out = append(out, s)
	}
	return out
}

// Makespan is the most context tokens (summed over its tiles, per layer)
// any one CTA reads when the tiles go, in the scheduler's order, each to
// the CTA that goes idle first: greedy list scheduling onto SMs CTAs.
// loads and splits are scratch (reused across calls; may be nil).
func (a *AttnTiles) Makespan(ctxs []int, loads *[]int64, splits *[]int) int64 {
	if len(ctxs) == 0 || a.SMs < 1 || a.KVHeads < 1 || a.BlockN < 1 {
		return 0
	}
	*splits = a.Splits(ctxs, (*splits)[:0])
	h := cpuHeap((*loads)[:0])
	for i := 0; i < a.SMs; i++ {
		h = append(h, 0)
	}
	for g := 0; g < len(ctxs); g += fa3GroupBatches {
		end := min(g+fa3GroupBatches, len(ctxs))
		for head := 0; head < a.KVHeads; head++ {
			for b := g; b < end; b++ {
				nb := ceilDiv(ctxs[b], a.BlockN)
				s := (*splits)[b]
				per := ceilDiv(nb, s)
				for j := 0; j < s; j++ {
					lo := j * per * a.BlockN
					hi := min((j+1)*per*a.BlockN, ctxs[b])
					if hi > lo {
						h.addToMin(int64(hi - lo))
					}
				}
			}
		}
	}
	var m int64
	for _, v := range h {
		m = max(m, v)
	}
	*loads = h
	return m
}

// AttnTailS is what FA3's tile schedule adds to a decode step's attention
// beyond the bandwidth bound: the makespan at CTAShare of HBM per CTA,
// less the linear context term the step already charges (never below 0).
// 0 without AttnTiles.
func (t Timing) AttnTailS(ctxs []int, loads *[]int64, splits *[]int) float64 {
	a := t.AttnTiles
	if a == nil || a.CTAShare <= 0 || len(ctxs) == 0 {
		return 0
	}
	var total int64
	for _, c := range ctxs {
		total += int64(c)
	}
	slope := t.CtxSlope(len(ctxs)) // all KV heads of a token, all layers, at the KV read rate
	perTileToken := slope / float64(a.KVHeads) / (a.CTAShare)
	tail := float64(a.Makespan(ctxs, loads, splits))*perTileToken - float64(total)*slope
	return math.Max(tail, 0)
}

// cpuHeap is a min-heap of CTA loads.
type cpuHeap []int64

// addToMin adds w to the least loaded CTA and restores the heap.
func (h cpuHeap) addToMin(w int64) {
	h[0] += w
	i, n := 0, len(h)
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && h[l] < h[m] {
			m = l
		}
		if r < n && h[r] < h[m] {
			m = r
		}
		if m == i {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
