package engine

// Inter-token latency as a client sees it: the gap between consecutive
// tokens of one request. Decode runs are advanced arithmetically, so the gaps
// are added per run, not per token: within a run every sequence sees the
// same step durations, base + slope·i for step i.

// recordGaps adds the gaps of the decode run that ends now to the worker's
// histogram: each sequence's first gap runs from its previous token (through
// any prefill step it waited behind) to the end of the run's first step; the
// k−1 later gaps are the steps themselves, added in stretches whose
// durations lie within 0.5% of each other (the histogram's buckets are 1%).
func (w *Worker) recordGaps() {
	h := w.cfg.Gaps
	p := &w.plan
	if h == nil || p.decodeK <= 0 {
		return
	}
	first := w.stepStart + p.base
	n := 0
	for _, r := range w.decoding {
		if r.Stage == StageDecoding {
			h.Add(first-r.lastTokenAt, 1)
			n++
		}
	}
	for i := 1; i < p.decodeK && n > 0; {
		span := p.decodeK - i
		if p.slope > 0 {
			d := p.base + p.slope*float64(i)
			span = min(span, max(1, int(0.005*d/p.slope)))
		}
		mid := p.base + p.slope*(float64(i)+float64(span-1)/2)
		h.Add(mid, int64(span)*int64(n))
		i += span
	}
}
