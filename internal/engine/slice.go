package engine

import "math"

// Decode slicing (KVC v4, --tpot-slo-ms): SGLang's scheduler runs a prefill
// step whenever prefill is waiting, so a decode batch on a GPU that prefills
// a 100K-token prompt waits behind every chunk of it — a chunk at that
// context takes over a second, and a request decoding a few hundred tokens
// through it sees a TPOT of 50–100 ms.
//
// With SliceTPOTS = T set, every decoding request r has a stall budget: the
// time it can still wait without its TPOT passing T,
//
//	b_r = T·(o_r − 1) − (now − first token) − (o_r − g_r)·s
//
// for o_r output tokens, g_r generated so far and s the batch's decode step
// (what its remaining tokens take with no prefill). A decode step leaves b_r
// as it is; a prefill step of d seconds that gives the batch one token
// (mixed chunk) takes d − s from it. So the worker sizes each prefill chunk
// to the smallest budget in the batch — a new 100-token request brings
// (T − s)·99 seconds, 0.7 s at 12 ms over 5 ms steps — and when even a
// small chunk does not fit, decodes until the request holding the smallest
// budget has finished. A request already past T (b_r < 0) cannot be saved
// and holds nothing back.

// sliceStepTPOTs bounds one prefill step while a batch decodes, in TPOTs,
// whatever the budgets: a request that joins the batch just before a
// 1-second chunk pays it within its first tokens. At 16 TPOTs (192 ms at
// 12 ms) a chunk's step overhead stays under a tenth of the step.
const sliceStepTPOTs = 16

// sliceMinChunk is the smallest chunk worth a step while a batch decodes:
// below it the step's fixed overhead is most of the step, and the worker
// decodes instead.
const sliceMinChunk = 256

// slicePlan decides, at a step boundary, how long the next prefill step may
// take (w.sliceRoomS, for sliceChunk) and whether the worker must decode
// instead: then it returns the steps of that decode run.
func (w *Worker) slicePlan(now float64) (int, bool) {
	w.sliceRoomS = math.Inf(1)
	t := w.cfg.SliceTPOTS
	if t <= 0 || len(w.decoding) == 0 || w.chunked == nil && w.waiting.len() == 0 {
		return 0, false
	}
	b, ctx := w.batchShape()
	wb, _ := w.windowS()
	s := w.tm.DecodeStepS(w.mdl, b, ctx) + wb
	least, holder := math.Inf(1), -1
	for i, r := range w.decoding {
		o := max(r.Output, 1)
		if r.Stage != StageDecoding || o <= 1 {
			continue
		}
		br := t*float64(o-1) - (now - r.FirstTokenAt) - float64(o-r.generated)*s
		if br >= 0 && br < least {
			least, holder = br, i
		}
	}
	if holder < 0 {
		return 0, false
	}
	// A mixed step takes its duration less the decode step from every
	// budget; the decode batch's own part of it is about s.
	w.sliceRoomS = min(least, sliceStepTPOTs*t) + s - w.tm.PrefillStepS() - s
	if w.sliceRoomS >= w.chunkWorkS(sliceMinChunk) {
		return 0, false
	}
	r := w.decoding[holder]
	return max(max(r.Output, 1)-r.generated, 1), true
}

// chunkWorkS is the least work a chunk of n tokens can be: the next
// prefill's own context, or none.
func (w *Worker) chunkWorkS(n int) float64 {
	p := 0
	if w.chunked != nil {
		p = w.chunked.CachedTokens + w.chunked.prefilled
	}
	return w.tm.PrefillWorkS(n, p)
}

// sliceChunk caps a chunk of n tokens after p cached ones to the prefill
// work slicePlan left room for (at least one token).
func (w *Worker) sliceChunk(n, p int) int {
	room := w.sliceRoomS
	if w.cfg.SliceTPOTS <= 0 || n <= 1 || math.IsInf(room, 1) || w.tm.PrefillWorkS(n, p) <= room {
		return n
	}
	// The largest m with PerToken·m + Attn·m·(p + m/2) ≤ room.
	a, b := w.tm.PrefillAttnS/2, w.tm.PrefillPerTokenS+w.tm.PrefillAttnS*float64(p)
	var m float64
	switch {
	case a > 0:
		m = (-b + math.Sqrt(b*b+4*a*max(room, 0))) / (2 * a)
	case b > 0:
		m = max(room, 0) / b
	}
	k := min(n, max(int(m+1e-6), 1)) // 1e-6: a float's last bit is no token
	w.sliceRoomS -= w.tm.PrefillWorkS(k, p)
	return k
}
