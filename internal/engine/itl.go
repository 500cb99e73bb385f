package engine

import "github.com/pdhybrid/pdhybrid/internal/metrics"

// Inter-token latency as a client sees it: the gap between consecutive
// tokens of one request. Decode runs are advanced arithmetically, so the gaps
// are added per run, not per token: within a run every sequence sees the
// same step durations, base + slope·i for step i.
//
// ITL is over completed requests only (as vLLM computes it, and as the
// summary says), yet a request's gaps are folded into the histogram at each
// decode run, for the whole batch at once: a sequence that was in the
// previous run sees the same first gap as every other such sequence (its
// last token came at that run's end), so a run adds one count for all of
// them and one per stretch of its later steps, whatever the batch size. Only
// a sequence's first run after it joins adds a gap of its own. What an
// aborted request (failed, timed out) had folded is taken back (unfoldGaps),
// from the worker's log of the runs since the oldest live sequence's first;
// Min and Max see a request's gaps only when it completes. Before, each
// request kept a list of its gaps (one store per token) until it finished:
// a fifth of a million-request run's time.

// gapStretch is a stretch of a decode run's steps whose durations lie
// within 0.5% of each other: span gaps of mid seconds.
type gapStretch struct {
	mid  float64
	span int64
}

// gapRun is one decode run in the worker's log: the first gap of a
// sequence that continues from the run before, and its later steps'
// stretches, gapRest[rest0:rest1].
type gapRun struct {
	shared       float64
	rest0, rest1 int32
}

// gapSpan is a stretch of consecutive decode runs one request was in,
// from its first (where its first gap was its own) to its latest.
type gapSpan struct {
	from, last int64 // run numbers, from 1; from 0: none
	first      float64
}

// gapState is what a request's gaps so far leave with it: its current span,
// the smallest and largest gap (for the histogram's Min and Max when it
// completes), and the spans a preemption closed (vLLM only, rare).
type gapState struct {
	span   gapSpan
	lo, hi float64
	closed []gapSpan
	parked bool // in Worker.gapParked: preempted with gaps folded
}

// gapLog is a worker's record of its recent decode runs, kept from the
// earliest run a live request's folded gaps came from.
type gapLog struct {
	run    int64 // number of the latest decode run; runs count from 1
	base   int64 // run number of runs[0]
	runs   []gapRun
	rest   []gapStretch
	keep   int     // compact when runs reaches this length
	end    float64 // end of the latest decode run
	parked []*Request
}

// recordGaps folds the gaps of the decode run that ends now: each
// sequence's first gap runs from its previous token (through any prefill
// step it waited behind) to the end of the run's first step; the k−1 later
// gaps are the steps themselves, in stretches whose durations lie within
// 0.5% of each other (the histogram's buckets are 1%).
func (w *Worker) recordGaps() {
	p := &w.plan
	h := w.cfg.Gaps
	if h == nil || p.decodeK <= 0 {
		return
	}
	g := &w.gapLog
	r0 := int32(len(g.rest))
	restLo, restHi := 0.0, 0.0
	for i := 1; i < p.decodeK; {
		span := p.decodeK - i
		if p.slope > 0 {
			d := p.base + p.slope*float64(i)
			span = min(span, max(1, int(0.005*d/p.slope)))
		}
		mid := p.base + p.slope*(float64(i)+float64(span-1)/2)
		if i == 1 {
			restLo, restHi = mid, mid
		} else {
			restLo, restHi = min(restLo, mid), max(restHi, mid)
		}
		g.rest = append(g.rest, gapStretch{mid: mid, span: int64(span)})
		i += span
	}
	hasRest := p.decodeK > 1
	first := w.stepStart + p.base
	prev, prevEnd := g.run, g.end
	g.run++
	run := g.run
	shared := first - prevEnd
	var n, nShared int64
	for _, r := range w.decoding {
		if r.Stage != StageDecoding {
			continue
		}
		n++
		s := &r.gapSt
		gap := shared
		if s.span.from != 0 && s.span.last == prev && r.lastTokenAt == prevEnd {
			nShared++
		} else {
			gap = first - r.lastTokenAt
			if s.span.from != 0 {
				s.closed = append(s.closed, s.span)
			} else {
				s.lo, s.hi = max(gap, 0), max(gap, 0)
			}
			s.span.from, s.span.first = run, gap
			h.Fold(gap, 1)
		}
		s.span.last = run
		gap = max(gap, 0)
		s.lo, s.hi = min(s.lo, gap), max(s.hi, gap)
		if hasRest {
			s.lo, s.hi = min(s.lo, restLo), max(s.hi, restHi)
		}
	}
	h.Fold(shared, nShared)
	for _, st := range g.rest[r0:] {
		h.Fold(st.mid, st.span*n)
	}
	if len(g.runs) == 0 {
		g.base = run
	}
	g.runs = append(g.runs, gapRun{shared: shared, rest0: r0, rest1: int32(len(g.rest))})
	g.end = w.stepEnd
	if len(g.runs) >= g.keep {
		w.compactGaps()
	}
}

// compactGaps drops the runs no live request's folded gaps came from: those
// before the earliest span of a sequence decoding or parked by preemption.
// It runs when the log doubles, so its scan of the batch is amortised.
func (w *Worker) compactGaps() {
	g := &w.gapLog
	from := g.run + 1
	earliest := func(r *Request) {
		s := &r.gapSt
		if s.span.from != 0 {
			from = min(from, s.span.from)
		}
		for _, c := range s.closed {
			from = min(from, c.from)
		}
	}
	for _, r := range w.decoding {
		earliest(r)
	}
	for _, r := range g.parked {
		earliest(r)
	}
	drop := min(int(from-g.base), len(g.runs))
	if drop > 0 {
		cut := int32(len(g.rest))
		if drop < len(g.runs) {
			cut = g.runs[drop].rest0
		}
		g.rest = g.rest[:copy(g.rest, g.rest[cut:])]
		g.runs = g.runs[:copy(g.runs, g.runs[drop:])]
		for i := range g.runs {
			g.runs[i].rest0 -= cut
			g.runs[i].rest1 -= cut
		}
		g.base = from
	}
	g.keep = max(256, 2*len(g.runs))
}

// completeGaps: r completed, so its folded gaps stay, and Min and Max now
// cover them.
func (w *Worker) completeGaps(r *Request) {
	if h := w.cfg.Gaps; h != nil && r.gapSt.span.from != 0 {
		h.Widen(r.gapSt.lo, r.gapSt.hi)
	}
	w.forgetGaps(r)
}

// unfoldGaps takes back the gaps r folded: it was aborted, and ITL counts
// completed requests only.
func (w *Worker) unfoldGaps(r *Request) {
	s := &r.gapSt
	if h := w.cfg.Gaps; h != nil && s.span.from != 0 {
		for _, sp := range s.closed {
			w.unfoldSpan(h, sp)
		}
		w.unfoldSpan(h, s.span)
	}
	w.forgetGaps(r)
}

func (w *Worker) unfoldSpan(h *metrics.GapHistogram, sp gapSpan) {
	g := &w.gapLog
	h.Unfold(sp.first, 1)
	for run := sp.from; run <= sp.last; run++ {
		x := g.runs[run-g.base]
		if run > sp.from {
			h.Unfold(x.shared, 1)
		}
		for _, st := range g.rest[x.rest0:x.rest1] {
			h.Unfold(st.mid, st.span)
		}
	}
}

// parkGaps keeps a preempted request's gaps reachable by compactGaps while
// it waits to compute its prompt again.
func (w *Worker) parkGaps(r *Request) {
	if w.cfg.Gaps != nil && r.gapSt.span.from != 0 && !r.gapSt.parked {
		r.gapSt.parked = true
		w.gapLog.parked = append(w.gapLog.parked, r)
	}
}

func (w *Worker) forgetGaps(r *Request) {
	if r.gapSt.parked {
		w.gapLog.parked = removeReq(w.gapLog.parked, r)
	}
	r.gapSt = gapState{}
}

// RetractLiveGaps takes back the folded gaps of every request that has not
// completed: a run that stops early reports ITL over what completed.
func (w *Worker) RetractLiveGaps() {
	if w.cfg.Gaps == nil {
		return
	}
	live := append([]*Request(nil), w.decoding...)
	live = append(live, w.gapLog.parked...)
	for _, r := range live {
		if r.gapSt.span.from != 0 {
			w.unfoldGaps(r)
		}
	}
}
