package report

import (
	"math"
	"sort"

	"github.com/pdhybrid/pdhybrid/internal/metrics"
)

// This file computes the numbers behind the charts. Every function is pure
// and takes plain slices so tests can check it against hand-computed values.

// minLogTTFT is where zero or sub-0.1 ms TTFTs are drawn on log axes: a log
// axis has no zero, and nothing real is faster than this.
const minLogTTFT = 1e-4

// sortedCompleted returns f over the completed requests, sorted ascending.
// Only completed requests enter latency charts: a failed request's timing
// says how fast it failed, not how fast the system served.
func sortedCompleted(reqs []Request, f func(*Request) float64) []float64 {
	var xs []float64
	for i := range reqs {
		if reqs[i].Completed {
			xs = append(xs, f(&reqs[i]))
		}
	}
	sort.Float64s(xs)
	return xs
}

// ECDFPoints picks at most about maxPts points of the empirical CDF of
// sorted xs: evenly spaced ranks for the body plus geometrically spaced
// ranks from the top so a log-survival plot keeps its tail down to 1/n.
// F is the share of samples ≤ x; S = P(X ≥ x) = (n−i)/n, which keeps the
// largest sample at 1/n instead of an unplottable zero.
func ECDFPoints(sorted []float64, maxPts int) (x, F, S []float64) {
	n := len(sorted)
	if n == 0 {
		return nil, nil, nil
	}
	keep := map[int]bool{0: true, n - 1: true}
	body := maxPts * 3 / 4
	if body < 2 {
		body = 2
	}
	for k := 0; k < body; k++ {
		keep[k*(n-1)/(body-1)] = true
	}
	for k := 1.0; k < float64(n); k *= 1.15 {
		keep[n-int(k)] = true
	}
	idx := make([]int, 0, len(keep))
	for i := range keep {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		x = append(x, sorted[i])
		F = append(F, float64(i+1)/float64(n))
		S = append(S, float64(n-i)/float64(n))
	}
	return x, F, S
}

// ScottBandwidth is scipy's gaussian_kde default: σ·n^(−1/5) with the
// sample (n−1) standard deviation. Degenerate samples get a small positive
// width so the density stays finite.
func ScottBandwidth(xs []float64) float64 {
	n := float64(len(xs))
	if n < 2 {
		return 1
	}
	var mean float64
	for _, x := range xs {
		mean += x
	}
	mean /= n
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	sd := math.Sqrt(ss / (n - 1))
	if sd == 0 {
		sd = math.Max(math.Abs(mean)*0.01, 1e-3)
	}
	return sd * math.Pow(n, -0.2)
}

// KDE evaluates a Gaussian kernel density estimate of sorted xs with
// bandwidth h at each grid point, divided by total (pass len(xs) for a
// proper density, or a larger count when xs is the body of a bigger sample
// so the curve's area is the body's share). Kernels are cut at 6h, which
// changes values by less than 1e-8 relative.
func KDE(sorted []float64, total int, h float64, grid []float64) []float64 {
	out := make([]float64, len(grid))
	if len(sorted) == 0 || total == 0 || h <= 0 {
		return out
	}
	norm := 1 / (float64(total) * h * math.Sqrt(2*math.Pi))
	for g, x := range grid {
		lo := sort.SearchFloat64s(sorted, x-6*h)
		var s float64
		for i := lo; i < len(sorted) && sorted[i] <= x+6*h; i++ {
			u := (x - sorted[i]) / h
			s += math.Exp(-0.5 * u * u)
		}
		out[g] = s * norm
	}
	return out
}

// linspace returns n evenly spaced points from a to b inclusive.
func linspace(a, b float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = a + (b-a)*float64(i)/float64(n-1)
	}
	return out
}

// Density is a curve ready to draw, with what it covers: its area is
// In/Total, the share of the sample inside the curve's window.
type Density struct {
	X, Y  []float64
	In    int     // samples inside the window
	Total int     // samples the curve is normalised by
	H     float64 // kernel bandwidth, in the x units the KDE ran in
}

// Share is the part of the sample the curve's area stands for.
func (d Density) Share() float64 {
	if d.Total == 0 {
		return 0
	}
	return float64(d.In) / float64(d.Total)
}

// Area integrates y over x with the trapezoid rule: the area the drawn
// polyline encloses with the x axis.
func Area(x, y []float64) float64 {
	var a float64
	for i := 1; i < len(x) && i < len(y); i++ {
		a += (x[i] - x[i-1]) * (y[i] + y[i-1]) / 2
	}
	return a
}

// WindowCount is how many of sorted lie in [0, hi].
func WindowCount(sorted []float64, hi float64) int {
	lo := sort.Search(len(sorted), func(i int) bool { return sorted[i] >= 0 })
	return sort.Search(len(sorted), func(i int) bool { return sorted[i] > hi }) - lo
}

// maxDensityPts bounds a density curve's points; the bandwidth is kept at
// least two grid steps (1/1000 of the window, half a pixel on the page), so
// the drawn polyline resolves every kernel and its trapezoid area is the
// curve's.
const maxDensityPts = 2001

// gridFor returns the number of grid points over span that keeps the step
// at most h/2 (at least minPts, at most maxDensityPts) and h raised to two
// steps of the finest grid allowed.
func gridFor(span, h float64, minPts int) (int, float64) {
	h = math.Max(h, 2*span/float64(maxDensityPts-1))
	pts := int(math.Ceil(2*span/h)) + 1
	return min(max(pts, minPts, 2), maxDensityPts), h
}

// ReflectedKDE is KDE for samples confined to [lo, hi]: every sample within
// 6h of a bound is mirrored across it, so the kernel mass that would spill
// outside folds back in and the curve's area over [lo, hi] is the samples'
// share (to within Φ(−lo…hi span/h), under 1e-4 when h ≤ (hi−lo)/4). A
// plain KDE of TTFTs piled near 0 loses almost half its area below 0.
func ReflectedKDE(sorted []float64, total int, h, lo, hi float64, grid []float64) []float64 {
	aug := make([]float64, 0, len(sorted)+16)
	aug = append(aug, sorted...)
	for _, x := range sorted {
		if x-lo < 6*h {
			aug = append(aug, 2*lo-x)
		}
		if hi-x < 6*h {
			aug = append(aug, 2*hi-x)
		}
	}
	sort.Float64s(aug)
	return KDE(aug, total, h, grid)
}

// BodyDensity is the linear-scale TTFT density on [0, window]: a
// boundary-reflected KDE over the samples in the window with their own
// Scott bandwidth (so the tail's spread does not blur the body, capped at
// window/4), normalised by the whole sample so the area under the curve is
// exactly the share of samples inside the window. The grid has at least
// minPts points and is fine enough for the bandwidth.
func BodyDensity(sorted []float64, window float64, minPts int) Density {
	k := sort.Search(len(sorted), func(i int) bool { return sorted[i] > window })
	j := sort.Search(len(sorted), func(i int) bool { return sorted[i] >= 0 })
	body := sorted[j:k]
	h := math.Min(ScottBandwidth(body), window/4)
	pts, h := gridFor(window, h, minPts)
	grid := linspace(0, window, pts)
	return Density{X: grid, Y: ReflectedKDE(body, len(sorted), h, 0, window, grid), In: len(body), Total: len(sorted), H: h}
}

// LogDensity is the KDE of log10(x) over the full range (density per
// decade), drawn against x on a log axis, so a fast-path mode at 0.1 s and
// a tail at 200 s are both visible. The grid reaches 4 bandwidths past the
// extreme samples, so the area in decades is all the sample (less than
// 1e-4 is cut).
func LogDensity(sorted []float64, minPts int) Density {
	if len(sorted) == 0 {
		return Density{}
	}
	lx := make([]float64, len(sorted))
	for i, x := range sorted {
		lx[i] = math.Log10(math.Max(x, minLogTTFT))
	}
	h := ScottBandwidth(lx)
	var pts int
	for range 2 { // a floor-widened h widens the span it must cover
		pts, h = gridFor(lx[len(lx)-1]-lx[0]+8*h, h, minPts)
	}
	grid := linspace(lx[0]-4*h, lx[len(lx)-1]+4*h, pts)
	y := KDE(lx, len(lx), h, grid)
	x := make([]float64, len(grid))
	for i, g := range grid {
		x[i] = math.Pow(10, g)
	}
	return Density{X: x, Y: y, In: len(sorted), Total: len(sorted), H: h}
}

// ModeStat is one execution mode's count and TTFT distribution.
type ModeStat struct {
	Mode      string
	Requests  int // every request that took the mode
	Completed int
	TTFT      metrics.Stats // completed only
	Latency   metrics.Stats
}

// ModeStats groups requests by execution mode, most used first.
func ModeStats(reqs []Request) []ModeStat {
	type acc struct {
		n         int
		ttft, lat []float64
	}
	by := map[string]*acc{}
	for i := range reqs {
		q := &reqs[i]
		if q.ExecutionMode == "" {
			continue
		}
		a := by[q.ExecutionMode]
		if a == nil {
			a = &acc{}
			by[q.ExecutionMode] = a
		}
		a.n++
		if q.Completed {
			a.ttft = append(a.ttft, q.TTFTS)
			a.lat = append(a.lat, q.LatencyS)
		}
	}
	out := make([]ModeStat, 0, len(by))
	for m, a := range by {
		out = append(out, ModeStat{Mode: m, Requests: a.n, Completed: len(a.ttft),
			TTFT: metrics.Describe(a.ttft), Latency: metrics.Describe(a.lat)})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Requests != out[j].Requests {
			return out[i].Requests > out[j].Requests
		}
		return out[i].Mode < out[j].Mode
	})
	return out
}

// ModeCount is one execution mode's share of a tail.
type ModeCount struct {
	Mode      string
	Count     int
	MeanTTFTS float64
}

// TailAttribution splits the completed requests whose TTFT is at or above
// the run's q-th percentile (numpy linear interpolation) by execution mode,
// largest share first. It answers the seed's question "which path makes
// the p99": the tail's composition, not the modes' averages.
func TailAttribution(reqs []Request, q float64) (threshold float64, tail int, modes []ModeCount) {
	sorted := sortedCompleted(reqs, func(r *Request) float64 { return r.TTFTS })
	if len(sorted) == 0 {
		return 0, 0, nil
	}
	threshold = metrics.Percentile(sorted, q)
	by := map[string]*ModeCount{}
	for i := range reqs {
		r := &reqs[i]
		if !r.Completed || r.TTFTS < threshold {
			continue
		}
		tail++
		m := by[r.ExecutionMode]
		if m == nil {
			m = &ModeCount{Mode: r.ExecutionMode}
			by[r.ExecutionMode] = m
		}
		m.Count++
		m.MeanTTFTS += r.TTFTS
	}
	for _, m := range by {
		m.MeanTTFTS /= float64(m.Count)
		modes = append(modes, *m)
	}
	sort.Slice(modes, func(i, j int) bool {
		if modes[i].Count != modes[j].Count {
			return modes[i].Count > modes[j].Count
		}
		return modes[i].Mode < modes[j].Mode
	})
	return threshold, tail, modes
}

// WorkerLoad is what one worker did over the completed requests.
type WorkerLoad struct {
	Worker        string
	Requests      int   // requests it prefilled or decoded
	PrefillTokens int64 // uncached prompt tokens it computed
	DecodeTokens  int64 // output tokens it generated
}

// WorkerLoads attributes completed requests to workers: the uncached prompt
// tokens to the prefill worker (or to the decode worker when there was none:
// a direct-to-D append or a colocated worker) and the output to the decode
// worker. Token work shows imbalance that request counts hide when requests
// differ 100× in size.
func WorkerLoads(reqs []Request) []WorkerLoad {
	by := map[string]*WorkerLoad{}
	get := func(w string) *WorkerLoad {
		l := by[w]
		if l == nil {
			l = &WorkerLoad{Worker: w}
			by[w] = l
		}
		return l
	}
	for i := range reqs {
		r := &reqs[i]
		if !r.Completed {
			continue
		}
		if r.PrefillWorker != "" {
			l := get(r.PrefillWorker)
			l.Requests++
			l.PrefillTokens += int64(r.UncachedTokens)
		}
		if r.DecodeWorker != "" {
			l := get(r.DecodeWorker)
			if r.DecodeWorker != r.PrefillWorker {
				l.Requests++
			}
			if r.PrefillWorker == "" {
				l.PrefillTokens += int64(r.UncachedTokens)
			}
			l.DecodeTokens += int64(r.OutputLength)
		}
	}
	out := make([]WorkerLoad, 0, len(by))
	for _, l := range by {
		out = append(out, *l)
	}
	sort.Slice(out, func(i, j int) bool { return naturalLess(out[i].Worker, out[j].Worker) })
	return out
}

// TurnHit is the prefix-cache hit rate of one turn number.
type TurnHit struct {
	Turn     int
	Requests int
	Cached   int64
	Input    int64
}

// Ratio is cached / input tokens (token-weighted, like the summary's
// cache_hit_ratio).
func (t TurnHit) Ratio() float64 {
	if t.Input == 0 {
		return 0
	}
	return float64(t.Cached) / float64(t.Input)
}

// CacheHitByTurn groups completed requests by turn number. Turn 1 can only
// hit a shared system prompt; later turns should hit their own history, so
// the curve shows whether the mechanism keeps sessions' KV where the next
// turn lands.
func CacheHitByTurn(reqs []Request) []TurnHit {
	by := map[int]*TurnHit{}
	for i := range reqs {
		r := &reqs[i]
		if !r.Completed {
			continue
		}
		t := by[r.Turn]
		if t == nil {
			t = &TurnHit{Turn: r.Turn}
			by[r.Turn] = t
		}
		t.Requests++
		t.Cached += int64(r.CachedTokens)
		t.Input += int64(r.InputLength)
	}
	out := make([]TurnHit, 0, len(by))
	for _, t := range by {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Turn < out[j].Turn })
	return out
}

// DChanges counts, per session, how often consecutive turns (by turn
// number, completed requests with a decode worker) landed on different
// decode workers. hist[k] is the number of sessions with k changes;
// sessions with fewer than two placed turns cannot change and are left out.
// Every change throws away the session's KV on the old D.
func DChanges(reqs []Request) (hist []int, transitions, changes int) {
	type turnD struct {
		turn int
		d    string
	}
	by := map[string][]turnD{}
	for i := range reqs {
		r := &reqs[i]
		if r.Completed && r.DecodeWorker != "" {
			by[r.SessionID] = append(by[r.SessionID], turnD{r.Turn, r.DecodeWorker})
		}
	}
	for _, ts := range by {
		if len(ts) < 2 {
			continue
		}
		sort.SliceStable(ts, func(i, j int) bool { return ts[i].turn < ts[j].turn })
		k := 0
		for i := 1; i < len(ts); i++ {
			transitions++
			if ts[i].d != ts[i-1].d {
				k++
			}
		}
		changes += k
		for len(hist) <= k {
			hist = append(hist, 0)
		}
		hist[k]++
	}
	return hist, transitions, changes
}
