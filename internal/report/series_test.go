package report

import (
	"math"
	"reflect"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

// Golden values below were computed by hand (or with Python's math module
// from the formula), not by the code under test.

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.15g, want %.15g", what, got, want)
	}
}

func TestReportPercentileGolden(t *testing.T) {
	// numpy.percentile([1,2,3,4,10], 90): rank 0.9·4 = 3.6 → 4 + 0.6·(10−4).
	near(t, "p90", metrics.Percentile([]float64{1, 2, 3, 4, 10}, 90), 7.6, 1e-12)
}

func TestReportKDEGolden(t *testing.T) {
	// Two samples at 0 and 2, bandwidth 1: the density at 1 is the standard
	// normal pdf at 1.
	got := KDE([]float64{0, 2}, 2, 1, []float64{1})
	near(t, "kde(1), h=1", got[0], 0.24197072451914337, 1e-12)

	// Scott's rule as scipy.stats.gaussian_kde: sd(ddof=1)·n^(−1/5).
	h := ScottBandwidth([]float64{0, 2})
	near(t, "scott h", h, 1.2311444133449163, 1e-12)
	near(t, "kde(1), scott", KDE([]float64{0, 2}, 2, h, []float64{1})[0], 0.23299001857548163, 1e-12)

	// Log density of {1, 10, 100}: a KDE of {0, 1, 2} in decades, evaluated
	// at 10 s (one decade), h = 3^(−1/5).
	d := LogDensity([]float64{1, 10, 100}, 201)
	mid := 100 // the grid is symmetric around log10 = 1
	near(t, "log grid midpoint", d.X[mid], 10, 1e-9)
	near(t, "log density at 10 s", d.Y[mid], 0.31815622092640145, 1e-12)
}

// TestReportDensityAreas: each curve's area is exactly the share of the
// sample its caption names, which is what the page states and the browser
// test checks.
func TestReportDensityAreas(t *testing.T) {
	// 7 of 10 samples are in [0, 10]: the body curve's area is 0.7.
	xs := []float64{1, 2, 2.5, 3, 4, 5, 6, 50, 80, 100}
	b := BodyDensity(xs, 10, 200)
	if b.In != 7 || b.Total != 10 || b.Share() != 0.7 {
		t.Errorf("body covers %d of %d (share %g), want 7 of 10", b.In, b.Total, b.Share())
	}
	near(t, "body density area", Area(b.X, b.Y), 0.7, 1e-4)

	// TTFTs piled just above 0 (a fast path) with a window reaching far
	// past them: a plain KDE loses the kernel mass below 0; the reflected
	// one keeps all of it.
	var fast []float64
	for i := range 200 {
		fast = append(fast, 0.1+0.2*float64(i)/199)
	}
	fast = append(fast, 8, 9, 9.5) // a small tail, all inside the window
	d := BodyDensity(fast, 10, 200)
	if d.Share() != 1 {
		t.Errorf("share %g, want 1", d.Share())
	}
	near(t, "fast-path area", Area(d.X, d.Y), 1, 1e-4)
	plain := KDE(fast, len(fast), d.H, d.X)
	if a := Area(d.X, plain); a > 0.9 {
		t.Errorf("a plain KDE keeps %.3f of the area; the test would not show the boundary loss", a)
	}

	// Uniform samples on [0, 1]: reflection keeps the density flat up to
	// both bounds instead of halving it there.
	var uni []float64
	for i := range 1000 {
		uni = append(uni, (float64(i)+0.5)/1000)
	}
	u := BodyDensity(uni, 1, 200)
	near(t, "uniform density at 0", u.Y[0], 1, 0.1)
	near(t, "uniform density at 1", u.Y[len(u.Y)-1], 1, 0.1)
	near(t, "uniform area", Area(u.X, u.Y), 1, 1e-4)

	// The grid resolves even a very narrow body: step ≤ h/2.
	var narrow []float64
	for i := range 500 {
		narrow = append(narrow, 0.16+1e-4*float64(i%7))
	}
	nd := BodyDensity(narrow, 200, 200)
	if step := nd.X[1] - nd.X[0]; step > nd.H/2*(1+1e-9) {
		t.Errorf("grid step %g > h/2 = %g", step, nd.H/2)
	}
	near(t, "narrow body area", Area(nd.X, nd.Y), 1, 1e-4)

	// The log density integrates to 1 per decade over its grid.
	l := LogDensity(xs, 200)
	lx := make([]float64, len(l.X))
	for i, x := range l.X {
		lx[i] = math.Log10(x)
	}
	near(t, "log density area", Area(lx, l.Y), 1, 1e-4)
	if l.Share() != 1 {
		t.Errorf("log density share %g, want 1", l.Share())
	}
}

func TestReportWindowCount(t *testing.T) {
	xs := []float64{0, 0.5, 1, 1, 2, 3}
	for _, c := range []struct {
		hi   float64
		want int
	}{{-1, 0}, {0, 1}, {0.9, 2}, {1, 4}, {2.5, 5}, {10, 6}} {
		if got := WindowCount(xs, c.hi); got != c.want {
			t.Errorf("WindowCount(≤ %g) = %d, want %d", c.hi, got, c.want)
		}
	}
	if d := BodyDensity(xs, 1, 50); d.In != 4 {
		t.Errorf("a sample on the window's edge is inside it: In = %d, want 4", d.In)
	}
}

func TestReportECDFGolden(t *testing.T) {
	x, F, S := ECDFPoints([]float64{1, 2, 3, 4}, 100)
	if !reflect.DeepEqual(x, []float64{1, 2, 3, 4}) ||
		!reflect.DeepEqual(F, []float64{0.25, 0.5, 0.75, 1}) ||
		!reflect.DeepEqual(S, []float64{1, 0.75, 0.5, 0.25}) {
		t.Errorf("ECDF = %v %v %v", x, F, S)
	}
	// Large inputs are thinned but keep both ends and the far tail.
	big := make([]float64, 100000)
	for i := range big {
		big[i] = float64(i)
	}
	x, F, S = ECDFPoints(big, 400)
	if len(x) > 600 || x[0] != 0 || x[len(x)-1] != 99999 || F[len(F)-1] != 1 || S[len(S)-1] != 1e-5 {
		t.Errorf("thinned ECDF: %d points, ends %v..%v, last S %v", len(x), x[0], x[len(x)-1], S[len(S)-1])
	}
	if x[len(x)-2] != 99998 {
		t.Errorf("tail not kept: second-last point %v", x[len(x)-2])
	}
}

// hand-built requests for attribution, turns and placement.
func handRequests() []Request {
	var rs []Request
	modes := []string{"direct", "direct", "direct", "seed", "seed", "seed", "fallback", "fallback", "fallback", "reseed"}
	for i := 0; i < 10; i++ {
		rs = append(rs, Request{TTFTS: float64(i + 1), ExecutionMode: modes[i], Completed: true})
	}
	// A failed request with a huge TTFT must not enter the tail.
	rs = append(rs, Request{TTFTS: 1000, ExecutionMode: "fallback", Cause: "failed: no-space"})
	return rs
}

func TestReportTailAttributionGolden(t *testing.T) {
	// TTFTs 1..10; p70 = 7 + 0.3·(8−7) = 7.3 → the tail is {8, 9, 10}:
	// fallback 8 and 9 (mean 8.5), reseed 10.
	thr, n, modes := TailAttribution(handRequests(), 70)
	near(t, "threshold", thr, 7.3, 1e-12)
	want := []ModeCount{{"fallback", 2, 8.5}, {"reseed", 1, 10}}
	if n != 3 || !reflect.DeepEqual(modes, want) {
		t.Errorf("tail n=%d %+v, want 3 %+v", n, modes, want)
	}
}

func TestReportModeStats(t *testing.T) {
	ms := ModeStats(handRequests())
	if ms[0].Mode != "fallback" || ms[0].Requests != 4 || ms[0].Completed != 3 || ms[0].TTFT.Mean != 8 {
		t.Errorf("first mode %+v", ms[0])
	}
}

func TestReportDChangesGolden(t *testing.T) {
	rs := []Request{
		// a: d0 d0 d1 d0 in turn order (lines out of order) → 2 changes in 3 transitions.
		{SessionID: "a", Turn: 3, DecodeWorker: "d1", Completed: true},
		{SessionID: "a", Turn: 1, DecodeWorker: "d0", Completed: true},
		{SessionID: "a", Turn: 2, DecodeWorker: "d0", Completed: true},
		{SessionID: "a", Turn: 4, DecodeWorker: "d0", Completed: true},
		// a failed turn does not count as a placement.
		{SessionID: "a", Turn: 5, DecodeWorker: "d3"},
		// b: d1 d1 → 0 changes.
		{SessionID: "b", Turn: 1, DecodeWorker: "d1", Completed: true},
		{SessionID: "b", Turn: 2, DecodeWorker: "d1", Completed: true},
		// c: one turn, cannot change.
		{SessionID: "c", Turn: 1, DecodeWorker: "d2", Completed: true},
	}
	hist, trans, ch := DChanges(rs)
	if !reflect.DeepEqual(hist, []int{1, 0, 1}) || trans != 4 || ch != 2 {
		t.Errorf("DChanges = %v %d %d, want [1 0 1] 4 2", hist, trans, ch)
	}
}

func TestReportCacheHitAndLoads(t *testing.T) {
	rs := []Request{
		{Turn: 1, InputLength: 1000, CachedTokens: 0, UncachedTokens: 1000, OutputLength: 10, PrefillWorker: "p0", DecodeWorker: "d0", Completed: true},
		{Turn: 2, InputLength: 1500, CachedTokens: 1000, UncachedTokens: 500, OutputLength: 20, DecodeWorker: "d0", Completed: true},
		{Turn: 2, InputLength: 500, CachedTokens: 0, UncachedTokens: 500, OutputLength: 5, PrefillWorker: "p0", DecodeWorker: "d10", Completed: true},
		{Turn: 2, InputLength: 9999, CachedTokens: 9999, DecodeWorker: "d2"}, // failed: ignored
	}
	hits := CacheHitByTurn(rs)
	if len(hits) != 2 || hits[0].Ratio() != 0 || hits[1].Ratio() != 0.5 || hits[1].Requests != 2 {
		t.Errorf("cache by turn %+v", hits)
	}
	got := WorkerLoads(rs)
	want := []WorkerLoad{
		{"d0", 2, 500, 30},
		{"d10", 1, 0, 5},
		{"p0", 2, 1500, 0},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("worker loads %+v, want %+v", got, want)
	}
}

func TestReportOccupancy(t *testing.T) {
	ws := []WorkerSeries{
		{Worker: "d0", T: []float64{0, 4, 10}, Occ: []float64{0.2, 0.6, 0}},
		{Worker: "d1", T: []float64{5}, Occ: []float64{1}},
	}
	// Buckets [0,5) and [5,10]. d0: (4·0.2 + 1·0.6)/5 = 0.28, then 0.6.
	// d1 starts at 5: absent from the first bucket, 1 in the second.
	tt, mean, mx := Occupancy(ws, 2)
	if !reflect.DeepEqual(tt, []float64{2.5, 7.5}) {
		t.Fatalf("bucket middles %v", tt)
	}
	for i, w := range [][2]float64{{0.28, 0.28}, {0.8, 1}} {
		near(t, "mean", mean[i], w[0], 1e-12)
		near(t, "max", mx[i], w[1], 1e-12)
	}
}

func TestReportColorsStable(t *testing.T) {
	got := RunColors([]string{"pd-disaggregation", "kvcache-centric", "kvcache-centric", "mystery"})
	want := []string{"#D55E00", "#0072B2", "#009E73", "#CC79A7"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("colors %v, want %v", got, want)
	}
	// A mechanism keeps its colour whatever its position.
	if c := RunColors([]string{"pd-colo", "kvcache-centric"}); c[1] != "#0072B2" || c[0] != "#009E73" {
		t.Errorf("colors %v", c)
	}
}

func TestReportTicks(t *testing.T) {
	s := newScale(Axis{Percent: true, Min: 0, Max: 1}, 0, 100)
	if !reflect.DeepEqual(s.labels, []string{"0%", "20%", "40%", "60%", "80%", "100%"}) {
		t.Errorf("percent ticks %v", s.labels)
	}
	l := newScale(Axis{Log: true, Min: 0.05, Max: 300}, 0, 100)
	if !reflect.DeepEqual(l.labels, []string{"0.01", "0.1", "1", "10", "100", "1k"}) {
		t.Errorf("log ticks %v", l.labels)
	}
	if !naturalLess("d9", "d10") || naturalLess("p1", "d1") {
		t.Error("naturalLess")
	}
}
