package engine

import (
	"math"
	"slices"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

// The gap log's units, driven by hand: a worker whose plan is set directly
// and whose decode runs are logged by beginGapRun, with no scheduler.

func itlWorker(t *testing.T) (*Worker, *metrics.GapHistogram) {
	t.Helper()
	h := metrics.NewGapHistogram()
	w, err := New(Config{Name: "c", Role: RoleColocated, Profile: testProfile(t), BlockSize: 16, PoolTokens: 1 << 20, Gaps: h})
	if err != nil {
		t.Fatal(err)
	}
	return w, h
}

// logGapRun logs a decode run of k steps, the first costing base and each
// later one slope more, starting where the previous run ended: its shared
// first gap is base.
func logGapRun(w *Worker, k int, base, slope float64) (shared, first float64) {
	w.plan.decodeK, w.plan.base, w.plan.slope = k, base, slope
	w.stepStart = w.gapLog.end
	w.stepEnd = w.stepStart + float64(k)*base
	return w.beginGapRun()
}

// A run's later steps are logged in stretches whose step costs lie within
// 0.5 % of each other: a stretch from step i spans int(0.005·d/slope)
// steps, d = base + slope·i, at least one; its mid is the cost of its
// middle step. With base 10 ms and slope 0.005·base/4.98, 0.005·d/slope is
// 4.98 + 0.005·i: 4 steps from i = 1 (4.985), then 5 from i = 5 (5.005),
// i = 10 (5.03) and i = 15 (5.055, the last 5 of a 20-step run). A flat
// run (slope 0) is one stretch; a one-step run has none.
func TestGapRunStretches(t *testing.T) {
	b := 0.01
	s := 0.005 * b / 4.98
	for _, tc := range []struct {
		name        string
		k           int
		slope       float64
		mids        []float64
		spans       []int64
		lo, hi      float64
		sharedFirst float64 // the shared first gap: base, as logGapRun starts each run where the last ended
	}{
		{"rising", 20, s, []float64{b + 2.5*s, b + 7*s, b + 12*s, b + 17*s}, []int64{4, 5, 5, 5}, b + 2.5*s, b + 17*s, b},
		{"flat", 5, 0, []float64{b}, []int64{4}, b, b, b},
		{"one step", 1, s, nil, nil, math.Inf(1), math.Inf(-1), b},
	} {
		w, _ := itlWorker(t)
		shared, first := logGapRun(w, tc.k, b, tc.slope)
		g := &w.gapLog
		if !near(shared, tc.sharedFirst) || !near(first, b) {
			t.Errorf("%s: shared %v first %v, want %v and %v", tc.name, shared, first, tc.sharedFirst, b)
		}
		if len(g.rest) != len(tc.mids) {
			t.Fatalf("%s: stretches %+v, want mids %v spans %v", tc.name, g.rest, tc.mids, tc.spans)
		}
		for i, st := range g.rest {
			if !near(st.mid, tc.mids[i]) || st.span != tc.spans[i] {
				t.Errorf("%s: stretch %d %+v, want mid %v span %d", tc.name, i, st, tc.mids[i], tc.spans[i])
			}
		}
		x := g.runs[0]
		if x.restLo != tc.lo && !near(x.restLo, tc.lo) || x.restHi != tc.hi && !near(x.restHi, tc.hi) {
			t.Errorf("%s: rest bounds [%v, %v], want [%v, %v]", tc.name, x.restLo, x.restHi, tc.lo, tc.hi)
		}
	}
}

// sixGapRuns logs six runs whose gaps are one value each (the shared first
// gap; run 2 also has one later step of the same cost): 3, 1, 2, 2, 6, 5.
func sixGapRuns(w *Worker, check func(run int)) {
	for i, v := range []float64{3, 1, 2, 2, 6, 5} {
		k := 1
		if i == 1 {
			k = 2
		}
		logGapRun(w, k, v, 0)
		if check != nil {
			check(i + 1)
		}
	}
}

// The suffix-extremum stacks hold strictly increasing (lows) and strictly
// decreasing (highs) values, each the extremum of the runs from the entry
// below it to its own: a tie replaces the older entry. Worked by hand for
// gaps 3, 1, 2, 2, 6, 5.
func TestGapBoundStacks(t *testing.T) {
	wantLows := [][]runBound{
		{{1, 3}},
		{{2, 1}},
		{{2, 1}, {3, 2}},
		{{2, 1}, {4, 2}},
		{{2, 1}, {4, 2}, {5, 6}},
		{{2, 1}, {4, 2}, {6, 5}},
	}
	wantHighs := [][]runBound{
		{{1, 3}},
		{{1, 3}, {2, 1}},
		{{1, 3}, {3, 2}},
		{{1, 3}, {4, 2}},
		{{5, 6}},
		{{5, 6}, {6, 5}},
	}
	w, _ := itlWorker(t)
	sixGapRuns(w, func(run int) {
		g := &w.gapLog
		if !slices.Equal(g.lows, wantLows[run-1]) || !slices.Equal(g.highs, wantHighs[run-1]) {
			t.Errorf("after run %d: lows %v highs %v, want %v and %v", run, g.lows, g.highs, wantLows[run-1], wantHighs[run-1])
		}
	})
	// The smallest and largest gap of runs a..6, for every a.
	g := &w.gapLog
	for a, want := range map[int64][2]float64{1: {1, 6}, 2: {1, 6}, 3: {2, 6}, 4: {2, 6}, 5: {5, 6}, 6: {5, 5}} {
		if lo, hi := suffixBound(g.lows, a), suffixBound(g.highs, a); lo != want[0] || hi != want[1] {
			t.Errorf("runs %d..6: [%v, %v], want %v", a, lo, hi, want)
		}
	}
}

// The bounds of a span, open to the latest run or closed at an earlier
// one, over the six runs: a span's own first gap, its first run's later
// steps, and every later run's gaps.
func TestSpanBounds(t *testing.T) {
	w, _ := itlWorker(t)
	sixGapRuns(w, nil)
	for _, tc := range []struct {
		from, last int64
		first      float64
		lo, hi     float64
	}{
		// Run 2's later step (1) with first 1.5, then runs 3..5 (2, 2, 6).
		{2, 5, 1.5, 1, 6},
		// Run 2's later step with first 1.5, then runs 3..4 (2, 2).
		{2, 4, 1.5, 1, 2},
		// Open to run 6: first 4, then runs 4..6 (2, 6, 5).
		{3, 6, 4, 2, 6},
		// Open from the latest run alone: its first gap only.
		{6, 6, 0.5, 0.5, 0.5},
	} {
		r := &Request{gapFrom: tc.from}
		r.gapSt.first = tc.first
		lo, hi := w.spanBoundsTo(r, tc.last)
		if lo != tc.lo || hi != tc.hi {
			t.Errorf("span %d..%d first %v: [%v, %v], want [%v, %v]", tc.from, tc.last, tc.first, lo, hi, tc.lo, tc.hi)
		}
	}
}

// A sequence that was in an earlier run but not the one before this one
// (its last token is not that run's end) does not continue its span: the
// span closes at the run before this one, and a new one opens here with a
// first gap of its own, folded at once.
func TestGapSeqReopens(t *testing.T) {
	w, h := itlWorker(t)
	sixGapRuns(w, nil)
	r := &Request{gapFrom: 2, lastTokenAt: 100}
	r.gapSt.first = 1.5
	before := h.Count()
	if w.gapSeq(r, 100.25, 99) {
		t.Fatal("a sequence whose last token is not the previous run's end continued")
	}
	want := []gapSpan{{from: 2, last: 5, first: 1.5, lo: 1, hi: 6}}
	if !slices.Equal(r.gapSt.closed, want) || r.gapFrom != 6 || r.gapSt.first != 0.25 || h.Count() != before+1 {
		t.Fatalf("closed %+v from %d first %v, %d folded; want %+v, 6, 0.25, %d", r.gapSt.closed, r.gapFrom, r.gapSt.first, h.Count(), want, before+1)
	}
	// One whose last token is the previous run's end continues.
	r2 := &Request{gapFrom: 3, lastTokenAt: 99}
	if !w.gapSeq(r2, 100.25, 99) || r2.gapFrom != 3 || r2.gapSt.closed != nil {
		t.Fatalf("continuing sequence: from %d closed %+v", r2.gapFrom, r2.gapSt.closed)
	}
}

// A request decoding run after run keeps one open span from its first
// run: no span closes and no gap of its own is taken after the first. A
// long request (200 tokens) runs beside three short ones (20, 40, 60),
// whose ends split its decoding into runs; every token after each
// request's first is one gap: 199 + 19 + 39 + 59 = 316.
func TestGapSpanStaysOpen(t *testing.T) {
	w, h := itlWorker(t)
	long := &Request{ID: 1, Kind: Full, Input: 100, Output: 200}
	for i, r := range []*Request{long, {ID: 2, Kind: Full, Input: 100, Output: 20}, {ID: 3, Kind: Full, Input: 100, Output: 40}, {ID: 4, Kind: Full, Input: 100, Output: 60}} {
		if err := w.Submit(0, r); err != nil {
			t.Fatal(err, i)
		}
	}
	from, runs := int64(0), 0
	for {
		next, ok := w.NextTime()
		if !ok {
			break
		}
		w.Advance(next)
		w.TakeEvents()
		if long.gapFrom != 0 {
			runs++
			if from == 0 {
				from = long.gapFrom
			}
			if long.gapFrom != from || long.gapSt.closed != nil {
				t.Fatalf("run %d: span from %d (first %d), closed %+v", w.gapLog.run, long.gapFrom, from, long.gapSt.closed)
			}
		}
	}
	if runs < 3 || h.Count() != 316 {
		t.Fatalf("%d runs seen open, %d gaps; want at least 3 runs and 316 gaps", runs, h.Count())
	}
}

// endGapRun compacts the log when it reaches keep runs, not before or
// after: with keep 4 and nothing live, the fourth run empties it.
func TestGapLogCompactsAtKeep(t *testing.T) {
	w, _ := itlWorker(t)
	w.gapLog.keep = 4
	for i, want := range []int{1, 2, 3, 0} {
		shared, _ := logGapRun(w, 1, 0.01, 0)
		w.endGapRun(shared, 0, 0)
		if got := len(w.gapLog.runs); got != want {
			t.Fatalf("after run %d: %d runs logged, want %d", i+1, got, want)
		}
	}
	if w.gapLog.keep != gapLogMin {
		t.Fatalf("keep %d after compaction, want %d", w.gapLog.keep, gapLogMin)
	}
}

// compactGaps drops the runs before the earliest live span. Over the six
// runs: nothing live drops all six (base 7); a span open from run 5 keeps
// runs 5 and 6 (base 5, run 2's later step dropped with it) and, of the
// stacks, the first entry at or after run 6 and everything above it.
func TestCompactGapsExact(t *testing.T) {
	w, _ := itlWorker(t)
	sixGapRuns(w, nil)
	w.compactGaps()
	g := &w.gapLog
	if len(g.runs) != 0 || len(g.rest) != 0 || g.base != 7 {
		t.Fatalf("nothing live: %d runs, %d stretches, base %d; want 0, 0, 7", len(g.runs), len(g.rest), g.base)
	}

	w, _ = itlWorker(t)
	sixGapRuns(w, nil)
	r := &Request{gapFrom: 5}
	r.gapSt.first = 0.5
	w.decoding = append(w.decoding, r)
	w.compactGaps()
	g = &w.gapLog
	if len(g.runs) != 2 || len(g.rest) != 0 || g.base != 5 {
		t.Fatalf("span from 5: %d runs, %d stretches, base %d; want 2, 0, 5", len(g.runs), len(g.rest), g.base)
	}
	if want := []runBound{{6, 5}}; !slices.Equal(g.lows, want) || !slices.Equal(g.highs, want) {
		t.Fatalf("stacks lows %v highs %v, want both %v", g.lows, g.highs, want)
	}
	// Its bounds still answer: first 0.5, runs 6 (5).
	if lo, hi := w.spanBounds(r); lo != 0.5 || hi != 5 {
		t.Fatalf("bounds after compaction [%v, %v], want [0.5, 5]", lo, hi)
	}
}

// A preempted request's closed span: completing widens Min and Max by it
// even with no span open (its recompute emitted its last token), and
// retracting the live gaps unfolds it. One run of 3 steps of 0.5 s after
// a first token at 0: its own first gap 0.5 and 2 later steps of 0.5.
func TestParkedSpanCompletesAndRetracts(t *testing.T) {
	for _, complete := range []bool{true, false} {
		w, h := itlWorker(t)
		r := &Request{ID: 1}
		shared, first := logGapRun(w, 3, 0.5, 0)
		continued := int64(0)
		if w.gapSeq(r, first, 0) {
			continued++
		}
		w.decoding = append(w.decoding, r) // live while the run's log compacts
		w.endGapRun(shared, 1, continued)
		w.decoding = removeReq(w.decoding, r) // preempted
		if h.Count() != 3 {
			t.Fatalf("%d gaps folded, want 3", h.Count())
		}
		w.parkGaps(r)
		if r.gapFrom != 0 || len(r.gapSt.closed) != 1 || !r.gapSt.parked {
			t.Fatalf("parked: from %d closed %+v", r.gapFrom, r.gapSt.closed)
		}
		if complete {
			w.completeGaps(r)
			if h.Count() != 3 || h.Min() != 0.5 || h.Max() != 0.5 {
				t.Fatalf("completed: %d gaps in [%v, %v], want 3 in [0.5, 0.5]", h.Count(), h.Min(), h.Max())
			}
			continue
		}
		w.RetractLiveGaps()
		if h.Count() != 0 || len(w.gapLog.parked) != 0 {
			t.Fatalf("retracted: %d gaps, %d parked; want 0 and 0", h.Count(), len(w.gapLog.parked))
		}
	}
}
