package model

import (
	"math"
	"slices"
)

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
//     batch by batch in the batch's order, each batch's heads in turn and
//     each head's splits in turn; tiles are not sorted by length (the
//     sorting variant is off: varlen_sort_batches = false).
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

// fa3ExactWaves bounds the exact list schedule: beyond this many tiles per
// CTA the dynamic fetch has balanced the CTAs to within one tile, and only
// the last wave decides the tail (Makespan).
const fa3ExactWaves = 8

// Makespan is the most context tokens (summed over its tiles, per layer)
// any one CTA reads when the tiles go, in the scheduler's order, each to
// the CTA that goes idle first: greedy list scheduling onto SMs CTAs.
// Up to fa3ExactWaves tiles per CTA it is exact; beyond, every tile but
// the last SMs is taken as spread evenly, the CTAs' finish times staggered
// uniformly over one mean tile (a dynamic queue's steady state), and the
// last SMs tiles are scheduled onto them exactly. loads and splits are
// scratch (reused across calls; may be nil).
func (a *AttnTiles) Makespan(ctxs []int, loads *[]int64, splits *[]int) int64 {
	if len(ctxs) == 0 || a.SMs < 1 || a.KVHeads < 1 || a.BlockN < 1 {
		return 0
	}
	*splits = a.Splits(ctxs, (*splits)[:0])
	n, total := 0, int64(0)
	for b, s := range *splits {
		n += s * a.KVHeads
		total += int64(ctxs[b]) * int64(a.KVHeads)
	}
	exact := n <= fa3ExactWaves*a.SMs
	keep := n // tiles scheduled one by one, the last of the order
	if !exact {
		keep = a.SMs
	}
	// The kept tiles, last first: walk the order backwards.
	buf := (*loads)[:0]
	for b := len(ctxs) - 1; b >= 0 && len(buf) < keep; b-- {
		nb := ceilDiv(ctxs[b], a.BlockN)
		s := (*splits)[b]
		per := ceilDiv(nb, s)
		for head := a.KVHeads - 1; head >= 0 && len(buf) < keep; head-- {
			for j := s - 1; j >= 0 && len(buf) < keep; j-- {
				buf = append(buf, int64(min((j+1)*per*a.BlockN, ctxs[b])-min(j*per*a.BlockN, ctxs[b])))
			}
		}
	}
	slices.Reverse(buf)
	// CTAs after them in the same buffer.
	h := cpuHeap(buf[len(buf):len(buf)])
	for i := 0; i < a.SMs; i++ {
		h = append(h, 0)
	}
	tiles := buf[:len(buf)]
	first := 0
	if exact {
		// The first SMs tiles each start on an idle CTA.
		first = min(len(tiles), a.SMs)
		copy(h, tiles[:first])
		h.init()
	} else {
		var rest int64
		for _, w := range tiles {
			rest += w
		}
		h.stagger(total-rest, int64(n-len(tiles)))
	}
	for _, w := range tiles[first:] {
		h.addToMin(w)
	}
	var m int64
	for _, v := range h {
		m = max(m, v)
	}
	*loads = buf
	return m
}

// stagger sets the CTAs' loads to total tokens of count tiles spread
// evenly, their finish times staggered uniformly over one mean tile
// (ascending, so the slice stays a min-heap).
func (h cpuHeap) stagger(total, count int64) {
	s := int64(len(h))
	mean := total / count
	base := total/s - mean/2
	for i := range h {
		h[i] = base + mean*int64(i)/s
	}
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

// init orders h as a min-heap.
func (h cpuHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// addToMin adds w to the least loaded CTA and restores the heap.
func (h cpuHeap) addToMin(w int64) {
	h[0] += w
	h.down(0)
}

// down sifts element i down to its place.
func (h cpuHeap) down(i int) {
	n := len(h)
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
