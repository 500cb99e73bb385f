package metrics

import (
	"math"
	"testing"
)

// within reports whether got is want to the histogram's bucket width (1 %).
func within(got, want float64) bool {
	return math.Abs(got-want) <= 0.01*want
}

// TestGapHistogramQuantileRanks: the rank ⌊q·(n−1)⌋ picks the bucket, at
// the edges between the sub-microsecond gaps and the first bucket and
// between two buckets.
func TestGapHistogramQuantileRanks(t *testing.T) {
	var h GapHistogram
	h.Add(0, 2)    // ranks 0, 1: below the range
	h.Add(0.01, 2) // ranks 2, 3
	h.Add(0.02, 2) // ranks 4, 5
	h.Add(0.04, 1) // rank 6
	for _, c := range []struct{ q, want float64 }{
		{0.2, 0},     // rank 1: the last zero
		{0.34, 0.01}, // rank 2: the first gap past the zeros
		{0.5, 0.01},  // rank 3
		{0.67, 0.02}, // rank 4: the first of the next bucket
		{0.9, 0.02},  // rank 5
		{0.99, 0.02}, // rank 5 (5.94)
	} {
		got := h.Quantile(c.q)
		if (c.want == 0 && got != 0) || (c.want != 0 && !within(got, c.want)) {
			t.Errorf("q%v = %v, want %v", c.q, got, c.want)
		}
	}
	// Three gaps: the median is the middle one (rank ⌊0.5·2⌋ = 1).
	var m GapHistogram
	m.Add(0.01, 1)
	m.Add(0.02, 1)
	m.Add(0.03, 1)
	if got := m.Quantile(0.5); !within(got, 0.02) {
		t.Errorf("median of 10, 20, 30 ms = %v, want 20 ms", got)
	}
	// Above the range: counted, and a quantile there is the maximum.
	var o GapHistogram
	o.Add(0.01, 1)
	o.Add(2e5, 1)
	if o.Count() != 2 || !within(o.Quantile(0.99), 0.01) || o.Quantile(1) != 2e5 || o.Max() != 2e5 {
		t.Errorf("over the range: count %d q0.99 %v q1 %v max %v", o.Count(), o.Quantile(0.99), o.Quantile(1), o.Max())
	}
}

// TestGapHistogramZeroCount: adding or folding no gaps changes nothing,
// not the range, not an empty histogram's mean.
func TestGapHistogramZeroCount(t *testing.T) {
	var e GapHistogram
	e.Fold(0.5, 0)
	e.Add(0.5, 0)
	e.Add(0.5, -3)
	e.Unfold(0.5, 0)
	if e.Count() != 0 || e.Mean() != 0 || e.Std() != 0 || e.Max() != 0 {
		t.Fatalf("after count-0 adds: count %d mean %v std %v max %v, want all 0", e.Count(), e.Mean(), e.Std(), e.Max())
	}
	e.Add(0.1, 1)
	e.Add(5, 0)
	if e.Count() != 1 || e.Mean() != 0.1 || e.Max() != 0.1 || e.Min() != 0.1 {
		t.Errorf("count %d mean %v min %v max %v, want 1 0.1 0.1 0.1", e.Count(), e.Mean(), e.Min(), e.Max())
	}
}

// TestGapHistogramUnfold: folding gaps and taking some back leaves the
// histogram of the rest; taking all back leaves an empty one.
func TestGapHistogramUnfold(t *testing.T) {
	var h, rest GapHistogram
	h.Fold(0.01, 3)
	h.Fold(0.05, 4)
	h.Fold(-1, 2) // counts as 0
	h.Fold(0.2, 1)
	h.Unfold(0.05, 3)
	h.Unfold(-1, 1)
	h.Unfold(math.NaN(), 5)
	h.Unfold(0.2, 0)
	rest.Fold(0.01, 3)
	rest.Fold(0.05, 1)
	rest.Fold(0, 1)
	rest.Fold(0.2, 1)
	if h.Count() != 6 || !near(h.Mean(), rest.Mean()) || !near(h.Std(), rest.Std()) {
		t.Fatalf("after unfold: count %d mean %v std %v, want 6 %v %v", h.Count(), h.Mean(), h.Std(), rest.Mean(), rest.Std())
	}
	if want := (0.03 + 0.05 + 0.2) / 6; !near(h.Mean(), want) {
		t.Errorf("mean %v, want %v", h.Mean(), want)
	}
	h.Widen(0, 0.2)
	rest.Widen(0, 0.2)
	for _, q := range []float64{0.1, 0.3, 0.5, 0.7, 0.9} {
		if g, w := h.Quantile(q), rest.Quantile(q); g != w {
			t.Errorf("q%v = %v, want %v", q, g, w)
		}
	}
	h.Unfold(0.01, 3)
	h.Unfold(0.05, 1)
	h.Unfold(0, 1)
	h.Unfold(0.2, 1)
	if h.Count() != 0 || h.Mean() != 0 || h.Std() != 0 {
		t.Errorf("all taken back: count %d mean %v std %v, want 0 0 0", h.Count(), h.Mean(), h.Std())
	}
}

// TestGapHistogramMergeBuckets: a merged histogram's quantiles come from
// both sides' buckets, not from the maximum.
func TestGapHistogramMergeBuckets(t *testing.T) {
	var a, b GapHistogram
	a.Add(0.01, 10)
	b.Add(0.02, 10)
	b.Add(0.1, 1)
	a.Merge(&b)
	// n = 21: the median's rank 10 is b's first 20 ms gap.
	if got := a.Quantile(0.5); !within(got, 0.02) {
		t.Errorf("merged median %v, want 0.02", got)
	}
	var e GapHistogram // an empty side takes the other's buckets
	e.Merge(&b)
	if got := e.Quantile(0.5); !within(got, 0.02) || e.Count() != 11 || e.Max() != 0.1 {
		t.Errorf("into empty: median %v count %d max %v", got, e.Count(), e.Max())
	}
}

// TestCauseEmptyClass: a message starting with a colon has an empty class.
func TestCauseEmptyClass(t *testing.T) {
	if got := Cause(":detail"); got != "" {
		t.Errorf("Cause(%q) = %q, want empty", ":detail", got)
	}
}

// TestNewSyncStageMS: a stage's length is its span in milliseconds.
func TestNewSyncStageMS(t *testing.T) {
	st := NewSyncStage(2.5, 2.75)
	if st.StartS != 2.5 || st.EndS != 2.75 || st.MS != 250 {
		t.Errorf("NewSyncStage(2.5, 2.75) = %+v, want 2.5 2.75 250 ms", *st)
	}
}

// TestGapHistogramRangeEdges: 1 µs exactly is the first bucket's (its
// quantile the bucket's geometric middle), 100,000 s exactly is past the
// range (its quantile the maximum), as the doc comment's half-open range
// says.
func TestGapHistogramRangeEdges(t *testing.T) {
	var lo GapHistogram
	lo.Add(gapMin, 1)
	lo.Add(1, 1)
	if got, want := lo.Quantile(0.4), gapMin*math.Sqrt(gapRatio); !near(got, want) {
		t.Errorf("quantile of a 1 µs gap = %v, want the first bucket's middle %v", got, want)
	}
	var hi GapHistogram
	hi.Add(1, 1)
	hi.Add(gapMax, 1)
	hi.Add(2*gapMax, 1)
	if got := hi.Quantile(0.5); got != 2*gapMax {
		t.Errorf("quantile of a 100,000 s gap = %v, want the maximum %v", got, 2*gapMax)
	}
}
