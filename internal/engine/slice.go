package engine

import "math"

// Decode slicing (KVC v4, --tpot-slo-ms): SGLang's scheduler runs a prefill
// step whenever prefill is waiting, so a decode batch on a GPU that prefills
// a 100K-token prompt waits behind every chunk of it — a chunk at that
// context takes over a second, and a request decoding a few hundred tokens
// through it sees a TPOT of 50–100 ms. With SliceTPOTS set, the worker
// keeps the decode batch's excess delay over that TPOT (the debt): a prefill
// step with requests decoding adds its duration less the one token it gives
// them (mixed chunk) or its whole duration (no mixed chunk); a decode run
// pays back the TPOT less each step's duration. While the debt is positive
// and a batch decodes, the next step is a decode run long enough to pay it
// back instead of the next prefill chunk. The prefill then gets the share of
// the GPU the TPOT leaves — about (T − s)/T, 60 % at 12 ms over 5 ms steps —
// and the batch decodes at T on average, however long the prompt.

// sliceStepTPOTs bounds one prefill step while a batch decodes, in TPOTs:
// a chunk at 100K tokens of context takes over a second, and a request of a
// hundred output tokens that waits through one such step has its TPOT
// raised by 10 ms however the debt is paid back after it. At 16 TPOTs
// (192 ms at 12 ms) a chunk's step overhead stays under a tenth of it.
const sliceStepTPOTs = 16

// sliceChunk caps a chunk of n tokens after p cached ones, while a batch
// decodes, to what one step of sliceStepTPOTs·SliceTPOTS holds (at least
// one token).
func (w *Worker) sliceChunk(n, p int) int {
	t := w.cfg.SliceTPOTS
	if t <= 0 || len(w.decoding) == 0 || n <= 1 {
		return n
	}
	room := sliceStepTPOTs*t - w.tm.PrefillOverheadS
	if w.tm.PrefillWorkS(n, p) <= room {
		return n
	}
	// The largest m with PerToken·m + Attn·m·(p + m/2) ≤ room.
	a, b := w.tm.PrefillAttnS/2, w.tm.PrefillPerTokenS+w.tm.PrefillAttnS*float64(p)
	var m float64
	if a > 0 {
		m = (-b + math.Sqrt(b*b+4*a*room)) / (2 * a)
	} else if b > 0 {
		m = room / b
	}
	return min(n, max(int(m), 1))
}

// sliceDue reports whether the next step must be a decode run that pays
// back the debt, and how many steps it takes.
func (w *Worker) sliceDue() (int, bool) {
	t := w.cfg.SliceTPOTS
	if t <= 0 || w.sliceDebt <= 0 || len(w.decoding) == 0 {
		return 0, false
	}
	if w.chunked == nil && w.waiting.len() == 0 {
		w.sliceDebt = 0 // nothing to prefill: decoding runs as usual
		return 0, false
	}
	b, ctx := w.batchShape()
	s := w.tm.DecodeStepS(w.mdl, b, ctx)
	if s >= t {
		return 0, false // the batch alone is over the TPOT: no slack to give
	}
	return max(int(math.Ceil(w.sliceDebt/(t-s))), 1), true
}

// sliceAccount updates the debt with the step that just ended: dur seconds,
// k decode steps given to the batch (0 when it waited), prefill whether the
// step carried prefill chunks.
func (w *Worker) sliceAccount(dur float64, k int, prefill, decoding bool) {
	t := w.cfg.SliceTPOTS
	if t <= 0 {
		return
	}
	if !decoding {
		w.sliceDebt = 0
		return
	}
	switch {
	case prefill:
		w.sliceDebt += dur - t*float64(k)
	case k > 0:
		w.sliceDebt = max(w.sliceDebt-(t*float64(k)-dur), 0)
	}
}
