package engine

// Inter-token latency as a client sees it: the gap between consecutive
// tokens of one request. Decode runs are advanced arithmetically, so the gaps
// are added per run, not per token: within a run every sequence sees the
// same step durations, base + slope·i for step i.
//
// ITL is over completed requests only (as vLLM computes it, and as the
// summary says): a request's gaps are held with it until it finishes, then
// added to the histogram; an aborted request's (failed, timed out) are
// dropped with it.

// gapStretch is a stretch of a decode run's steps whose durations lie
// within 0.5% of each other: span gaps of mid seconds.
type gapStretch struct {
	mid  float64
	span int64
}

// gapList is what a request's decode runs owe it, in run order: each run's
// first gap (from the request's previous token), and for the runs of more
// than one step, the later steps' stretches, shared by every sequence in the
// run. Most runs are one step (a prefill or an arrival ends them), so the
// first gaps are a plain list and the stretches a sparse one beside it.
type gapList struct {
	first []float64
	rest  []runRest
}

// runRest is a run's later steps: the run is first[at].
type runRest struct {
	at   int
	rest []gapStretch
}

// recordGaps holds the gaps of the decode run that ends now with each
// sequence in it: each sequence's first gap runs from its previous token
// (through any prefill step it waited behind) to the end of the run's first
// step; the k−1 later gaps are the steps themselves, in stretches whose
// durations lie within 0.5% of each other (the histogram's buckets are 1%).
func (w *Worker) recordGaps() {
	p := &w.plan
	if w.cfg.Gaps == nil || p.decodeK <= 0 {
		return
	}
	var rest []gapStretch
	for i := 1; i < p.decodeK; {
		span := p.decodeK - i
		if p.slope > 0 {
			d := p.base + p.slope*float64(i)
			span = min(span, max(1, int(0.005*d/p.slope)))
		}
		rest = append(rest, gapStretch{mid: p.base + p.slope*(float64(i)+float64(span-1)/2), span: int64(span)})
		i += span
	}
	first := w.stepStart + p.base
	for _, r := range w.decoding {
		if r.Stage == StageDecoding {
			g := &r.gaps
			if g.first == nil {
				*g = w.freeGapList()
			}
			if rest != nil {
				g.rest = append(g.rest, runRest{at: len(g.first), rest: rest})
			}
			g.first = append(g.first, first-r.lastTokenAt)
		}
	}
}

// freeGapList is an empty gap list for a request's first decode run: a
// finished request's, when one is free. A request gathers a gap per decode
// run (about one per output token when prefills keep breaking the runs), so
// growing a fresh list per request was most of a long run's allocation.
func (w *Worker) freeGapList() gapList {
	n := len(w.gapFree)
	if n == 0 {
		return gapList{}
	}
	g := w.gapFree[n-1]
	w.gapFree[n-1] = gapList{}
	w.gapFree = w.gapFree[:n-1]
	return g
}

// dropGaps frees a request's gap list for the next request's use.
func (w *Worker) dropGaps(r *Request) {
	g := r.gaps
	if cap(g.first) > 0 {
		clear(g.rest) // the runs' shared stretches are not kept alive
		w.gapFree = append(w.gapFree, gapList{first: g.first[:0], rest: g.rest[:0]})
	}
	r.gaps = gapList{}
}

// flushGaps adds a completed request's gaps to the histogram, in run order.
func (w *Worker) flushGaps(r *Request) {
	if h := w.cfg.Gaps; h != nil {
		rest := r.gaps.rest
		for i, f := range r.gaps.first {
			h.Add(f, 1)
			if len(rest) > 0 && rest[0].at == i {
				for _, s := range rest[0].rest {
					h.Add(s.mid, s.span)
				}
				rest = rest[1:]
			}
		}
	}
	w.dropGaps(r)
}
