package engine

import (
	"math"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

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
// stretches, gapRest[rest0:rest1], whose smallest and largest mids are
// restLo and restHi (+Inf and −Inf for a one-step run).
type gapRun struct {
	shared         float64
	restLo, restHi float64
	rest0, rest1   int32
}

// gapSpan is a stretch of consecutive decode runs one request was in, from
// its first (where its first gap was its own) to its latest, and the
// smallest and largest gaps in it: a span a preemption closed.
type gapSpan struct {
	from, last int64
	first      float64
	lo, hi     float64
}

// gapState is what a request's gaps so far leave with it beyond its open
// span's first run (Request.gapFrom): that run's own first gap, and the
// spans a preemption closed (vLLM only, rare).
type gapState struct {
	first  float64
	closed []gapSpan
	parked bool // in gapLog.parked: preempted with gaps folded
}

// runBound is an entry of a suffix-extremum stack: run's value bounds every
// run from the entry below it (exclusive) to run.
type runBound struct {
	run int64
	v   float64
}

// gapLog is a worker's record of its recent decode runs, kept from the
// earliest run a live request's folded gaps came from. lows and highs answer
// "the smallest (largest) gap of the runs since run a" in O(log runs) for a
// completing request's Min and Max, so no running sequence updates its own
// per step: lows holds increasing values, highs decreasing ones, each the
// extremum of the runs from the entry below it to its own.
type gapLog struct {
	run         int64 // number of the latest decode run; runs count from 1
	base        int64 // run number of runs[0]
	runs        []gapRun
	rest        []gapStretch
	lows, highs []runBound
	keep        int     // compact when runs reaches this length
	end         float64 // end of the latest decode run
	parked      []*Request
}

// beginGapRun logs the decode run that ends now and returns the first gap
// of a sequence continuing from the run before (shared) and the end of this
// run's first step (first, from which a joining sequence's own first gap is
// taken). The run's later k−1 gaps are the steps themselves, in stretches
// whose durations lie within 0.5% of each other (the histogram's buckets
// are 1%).
func (w *Worker) beginGapRun() (shared, first float64) {
	p := &w.plan
	g := &w.gapLog
	r0 := int32(len(g.rest))
	restLo, restHi := math.Inf(1), math.Inf(-1)
	for i := 1; i < p.decodeK; {
		span := p.decodeK - i
		if p.slope > 0 {
			d := p.base + p.slope*float64(i)
			span = min(span, max(1, int(0.005*d/p.slope)))
		}
		mid := p.base + p.slope*(float64(i)+float64(span-1)/2)
		restLo, restHi = min(restLo, max(mid, 0)), max(restHi, max(mid, 0))
		g.rest = append(g.rest, gapStretch{mid: mid, span: int64(span)})
		i += span
	}
	first = w.stepStart + p.base
	shared = first - g.end
	g.run++
	if len(g.runs) == 0 {
		g.base = g.run
	}
	g.runs = append(g.runs, gapRun{shared: shared, restLo: restLo, restHi: restHi, rest0: r0, rest1: int32(len(g.rest))})
	// A sequence continuing into this run sees shared and the rest; one
	// whose span starts here sees only the rest (its first gap is its own,
	// added to its bound when it completes).
	lo, hi := min(max(shared, 0), restLo), max(max(shared, 0), restHi)
	for n := len(g.lows); n > 0 && g.lows[n-1].v >= lo; n-- {
		g.lows = g.lows[:n-1]
	}
	g.lows = append(g.lows, runBound{g.run, lo})
	for n := len(g.highs); n > 0 && g.highs[n-1].v <= hi; n-- {
		g.highs = g.highs[:n-1]
	}
	g.highs = append(g.highs, runBound{g.run, hi})
	g.end = w.stepEnd
	return shared, first
}

// gapSeq takes r's gaps in the run beginGapRun logged: it continues its open
// span (it was in the run before, and its last token came at that run's
// end), or opens one with a first gap of its own, folded now. It reports
// whether r continued.
func (w *Worker) gapSeq(r *Request, first float64, prevEnd float64) bool {
	if r.gapFrom != 0 && r.lastTokenAt == prevEnd {
		return true
	}
	g := &w.gapLog
	if r.gapFrom != 0 {
		w.closeSpan(r, g.run-1)
	}
	gap := first - r.lastTokenAt
	r.gapFrom, r.gapSt.first = g.run, gap
	w.cfg.Gaps.Fold(gap, 1)
	return false
}

// endGapRun folds the run's gaps shared by the batch: n sequences ran its
// later steps, continued of them saw the shared first gap.
func (w *Worker) endGapRun(shared float64, n, continued int64) {
	h := w.cfg.Gaps
	g := &w.gapLog
	h.Fold(shared, continued)
	x := g.runs[len(g.runs)-1]
	for _, st := range g.rest[x.rest0:x.rest1] {
		h.Fold(st.mid, st.span*n)
	}
	if len(g.runs) >= g.keep {
		w.compactGaps()
	}
}

// spanBounds is the smallest and largest gap of r's open span, whose
// latest run is the log's latest.
func (w *Worker) spanBounds(r *Request) (lo, hi float64) {
	g := &w.gapLog
	from := r.gapFrom
	x := g.runs[from-g.base]
	first := max(r.gapSt.first, 0)
	lo, hi = min(first, x.restLo), max(first, x.restHi)
	if from < g.run {
		lo = min(lo, suffixBound(g.lows, from+1))
		hi = max(hi, suffixBound(g.highs, from+1))
	}
	return lo, hi
}

// suffixBound is the extremum of the runs from a to the latest: the first
// entry at or after a.
func suffixBound(st []runBound, a int64) float64 {
	i, j := 0, len(st)
	for i < j {
		m := int(uint(i+j) >> 1)
		if st[m].run < a {
			i = m + 1
		} else {
			j = m
		}
	}
	return st[i].v
}

// closeSpan ends r's open span at run last (a preemption, or a sequence
// that did not continue), keeping its bounds while they are still a suffix
// of the log.
func (w *Worker) closeSpan(r *Request, last int64) {
	lo, hi := w.spanBoundsTo(r, last)
	r.gapSt.closed = append(r.gapSt.closed, gapSpan{from: r.gapFrom, last: last, first: r.gapSt.first, lo: lo, hi: hi})
	r.gapFrom = 0
}

// spanBoundsTo is spanBounds for a span that ends at run last, which is
// the log's latest or the one before it (a sequence found not continuing
// as the next run begins): the later run is left out by scanning.
func (w *Worker) spanBoundsTo(r *Request, last int64) (lo, hi float64) {
	g := &w.gapLog
	if last == g.run {
		return w.spanBounds(r)
	}
	from := r.gapFrom
	first := max(r.gapSt.first, 0)
	x := g.runs[from-g.base]
	lo, hi = min(first, x.restLo), max(first, x.restHi)
	for run := from + 1; run <= last; run++ {
		y := g.runs[run-g.base]
		lo = min(lo, max(y.shared, 0), y.restLo)
		hi = max(hi, max(y.shared, 0), y.restHi)
	}
	return lo, hi
}

// gapLogMin is the log length below which it is not compacted.
const gapLogMin = 256

// compactGaps drops the runs no live request's folded gaps came from: those
// before the earliest span of a sequence decoding or parked by preemption.
// It runs when the log doubles, so its scan of the batch is amortised.
func (w *Worker) compactGaps() {
	g := &w.gapLog
	from := g.run + 1
	earliest := func(r *Request) {
		if r.gapFrom != 0 {
			from = min(from, r.gapFrom)
		}
		for _, c := range r.gapSt.closed {
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
		// A stack entry below from+1 never answers a query again (spans
		// start at from or later, and their suffixes at from+1 or later)
		// except as the bound of the runs up to it: keep the first entry at
		// or after from+1 and everything above.
		g.lows = trimBounds(g.lows, from+1)
		g.highs = trimBounds(g.highs, from+1)
	}
	g.keep = max(gapLogMin, 2*len(g.runs))
}

func trimBounds(st []runBound, a int64) []runBound {
	i := 0
	for i < len(st) && st[i].run < a {
		i++
	}
	return st[:copy(st, st[i:])]
}

// completeGaps: r completed, so its folded gaps stay, and Min and Max now
// cover them.
func (w *Worker) completeGaps(r *Request) {
	if h := w.cfg.Gaps; h != nil && (r.gapFrom != 0 || r.gapSt.closed != nil) {
		for _, c := range r.gapSt.closed {
			h.Widen(c.lo, c.hi)
		}
		if r.gapFrom != 0 {
			h.Widen(w.spanBounds(r))
		}
	}
	w.forgetGaps(r)
}

// unfoldGaps takes back the gaps r folded: it was aborted, and ITL counts
// completed requests only.
func (w *Worker) unfoldGaps(r *Request) {
	if h := w.cfg.Gaps; h != nil {
		for _, sp := range r.gapSt.closed {
			w.unfoldSpan(h, sp.from, sp.last, sp.first)
		}
		if r.gapFrom != 0 {
			w.unfoldSpan(h, r.gapFrom, w.gapLog.run, r.gapSt.first)
		}
	}
	w.forgetGaps(r)
}

func (w *Worker) unfoldSpan(h *metrics.GapHistogram, from, last int64, first float64) {
	g := &w.gapLog
	h.Unfold(first, 1)
	for run := from; run <= last; run++ {
		x := g.runs[run-g.base]
		if run > from {
			h.Unfold(x.shared, 1)
		}
		for _, st := range g.rest[x.rest0:x.rest1] {
			h.Unfold(st.mid, st.span)
		}
	}
}

// parkGaps closes a preempted request's span and keeps it reachable by
// compactGaps while it waits to compute its prompt again.
func (w *Worker) parkGaps(r *Request) {
	if w.cfg.Gaps == nil || r.gapFrom == 0 {
		return
	}
	w.closeSpan(r, w.gapLog.run)
	if !r.gapSt.parked {
		r.gapSt.parked = true
		w.gapLog.parked = append(w.gapLog.parked, r)
	}
}

func (w *Worker) forgetGaps(r *Request) {
	if r.gapSt.parked {
		w.gapLog.parked = removeReq(w.gapLog.parked, r)
	}
	r.gapFrom, r.gapSt = 0, gapState{}
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
		if r.gapFrom != 0 || r.gapSt.closed != nil {
			w.unfoldGaps(r)
		}
	}
}
