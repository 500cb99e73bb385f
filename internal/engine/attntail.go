package engine

// attnScratch holds the buffers the tile-schedule tail reuses per plan.
type attnScratch struct {
	ctxs   []int
	loads  []int64
	splits []int
}

// attnTailS is what decode attention's tile schedule adds to a step over
// the current decode batch (model.Timing.AttnTailS: FlashAttention-3's
// varlen scheduler, where a profile carries it; 0 otherwise). It is taken
// at a run's first step and held for the run: a run's contexts grow by one
// token a step, which moves the tail by far less than a step's rounding.
func (w *Worker) attnTailS() float64 {
	if w.tm.AttnTiles == nil || len(w.decoding) == 0 {
		return 0
	}
	a := &w.attn
	a.ctxs = a.ctxs[:0]
	for _, r := range w.decoding {
		a.ctxs = append(a.ctxs, r.Input+r.generated)
	}
	return w.tm.AttnTailS(a.ctxs, &a.loads, &a.splits)
}
