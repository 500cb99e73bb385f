package metrics

import "math"

// GapHistogram is a distribution of time gaps in seconds — inter-token
// latencies, one entry per generated token after the first — kept in
// logarithmic buckets, so memory stays fixed (about 20 KB) however many
// gaps a run adds. Quantiles are exact to the bucket width, 1% of the value
// (gaps between 1 µs and 100,000 s; outside that range the bucket is the
// recorded minimum or maximum). Mean, Std, Min, Max and Count are exact.
//
// The zero value is an empty histogram ready to use. It is not safe for
// concurrent use.
type GapHistogram struct {
	counts   []int64 // bucket i: gaps in [gapMin·gapRatio^i, gapMin·gapRatio^(i+1))
	under    int64   // gaps below gapMin (0 included)
	over     int64   // gaps at or above gapMax
	n        int64
	mean, m2 float64 // running mean and sum of squared deviations (Welford, weighted)
	min, max float64
	ranged   bool // min and max hold a gap (Widen was called)
}

const (
	gapMin   = 1e-6
	gapMax   = 1e5
	gapRatio = 1.01
)

var (
	gapLogRatio = math.Log(gapRatio)
	gapBuckets  = int(math.Ceil(math.Log(gapMax/gapMin) / gapLogRatio))
)

// NewGapHistogram returns an empty histogram.
func NewGapHistogram() *GapHistogram { return &GapHistogram{} }

// Add records count gaps of gapS seconds each (a decode run of k equal
// steps adds k). NaN gaps and counts ≤ 0 are ignored; negative gaps count
// as 0.
func (h *GapHistogram) Add(gapS float64, count int64) {
	if count <= 0 || math.IsNaN(gapS) {
		return
	}
	h.Fold(gapS, count)
	h.Widen(gapS, gapS)
}

// Fold records count gaps of gapS seconds in the buckets, the count, mean
// and spread, but not in Min and Max: Widen says those. It lets a caller
// add gaps before it knows they will stay (a simulator folds every running
// sequence's gaps at each decode step) and take them back with Unfold,
// while Min and Max only ever see gaps that stayed. NaN gaps and counts ≤ 0
// are ignored; negative gaps count as 0.
func (h *GapHistogram) Fold(gapS float64, count int64) {
	if count <= 0 || math.IsNaN(gapS) {
		return
	}
	gapS = max(gapS, 0)
	h.bucket(gapS, count)
	n := h.n + count
	d := gapS - h.mean
	h.mean += d * float64(count) / float64(n)
	h.m2 += d * float64(count) * (gapS - h.mean)
	h.n = n
}

// Unfold takes back count gaps of gapS seconds that Fold added (the
// weighted Welford step run backwards). Bucket counts and Count come back
// exactly; the mean and spread to rounding.
func (h *GapHistogram) Unfold(gapS float64, count int64) {
	if count <= 0 || math.IsNaN(gapS) {
		return
	}
	gapS = max(gapS, 0)
	h.bucket(gapS, -count)
	n := h.n - count
	if n <= 0 {
		h.n, h.mean, h.m2 = 0, 0, 0
		return
	}
	mean := h.mean - float64(count)*(gapS-h.mean)/float64(n)
	h.m2 -= float64(count) * (gapS - mean) * (gapS - h.mean)
	h.mean, h.n = mean, n
}

// Widen makes Min and Max cover [lo, hi] (negative gaps count as 0; NaN is
// ignored).
func (h *GapHistogram) Widen(lo, hi float64) {
	if math.IsNaN(lo) || math.IsNaN(hi) {
		return
	}
	lo, hi = max(lo, 0), max(hi, 0)
	if !h.ranged {
		h.min, h.max, h.ranged = lo, hi, true
		return
	}
	h.min, h.max = min(h.min, lo), max(h.max, hi)
}

// bucket adds count (which may be negative) to gapS's bucket.
func (h *GapHistogram) bucket(gapS float64, count int64) {
	switch {
	case gapS < gapMin:
		h.under += count
	case gapS >= gapMax:
		h.over += count
	default:
		if h.counts == nil {
			h.counts = make([]int64, gapBuckets)
		}
		h.counts[bucketOf(gapS)] += count
	}
}

// bucketOf is the bucket of a gap in [gapMin, gapMax): bucketLog's
// answer, found without a logarithm. A simulation adds a gap per running
// sequence per decode step, and the logarithm was a fifth of a DP run's
// time. The float's exponent and top mantissa bits pick a slice of an
// octave narrower than a bucket (1/256 of an octave, a ratio under 1.003),
// which holds at most one bucket boundary; the boundaries are the exact
// smallest floats bucketLog puts in each bucket, so the answer is the same.
func bucketOf(x float64) int {
	b := math.Float64bits(x)
	k := int(b>>(52-gapSliceBits)) - gapFirstSlice
	i := int(gapSliceBucket[k])
	if i+1 < gapBuckets && x >= gapBound[i+1] {
		i++
	}
	return i
}

// bucketLog is the bucket definition: floor(log(x/gapMin)/log(gapRatio)).
func bucketLog(x float64) int {
	i := int(math.Log(x/gapMin) / gapLogRatio)
	return min(max(i, 0), gapBuckets-1)
}

const gapSliceBits = 8 // top mantissa bits per slice: 256 slices an octave

var (
	gapFirstSlice  int      // slice index of gapMin
	gapSliceBucket []uint16 // bucket of each slice's first float
)

func init() { buildGapSlices() }

// buildGapSlices finds the slices' buckets from the boundaries by one
// walk: the walk's answer is the logarithm's, since boundaries and slices
// both ascend, and it takes no logarithm per slice. The boundaries
// themselves are a table written out once (gapbounds.go): finding them
// took tens of thousands of logarithms, the largest start-up work of every
// pdhybrid process.
func buildGapSlices() {
	gapFirstSlice = int(math.Float64bits(gapMin) >> (52 - gapSliceBits))
	last := int(math.Float64bits(gapMax) >> (52 - gapSliceBits))
	gapSliceBucket = make([]uint16, last-gapFirstSlice+1)
	i := 0
	for k := range gapSliceBucket {
		start := max(math.Float64frombits(uint64(k+gapFirstSlice)<<(52-gapSliceBits)), gapMin)
		for i+1 < gapBuckets && gapBound[i+1] <= start {
			i++
		}
		gapSliceBucket[k] = uint16(i)
	}
}

// Merge adds every gap of o to h.
func (h *GapHistogram) Merge(o *GapHistogram) {
	if o == nil || o.n == 0 {
		return
	}
	if o.ranged {
		h.Widen(o.min, o.max)
	}
	if o.counts != nil {
		if h.counts == nil {
			h.counts = make([]int64, gapBuckets)
		}
		for i, c := range o.counts {
			h.counts[i] += c
		}
	}
	h.under += o.under
	h.over += o.over
	n := h.n + o.n
	d := o.mean - h.mean
	h.m2 += o.m2 + d*d*float64(h.n)*float64(o.n)/float64(n)
	h.mean += d * float64(o.n) / float64(n)
	h.n = n
}

// Count is the number of gaps recorded.
func (h *GapHistogram) Count() int64 { return h.n }

// Mean is the exact mean gap in seconds (0 when empty).
func (h *GapHistogram) Mean() float64 { return h.mean }

// Std is the exact population standard deviation in seconds.
func (h *GapHistogram) Std() float64 {
	if h.n == 0 {
		return 0
	}
	return math.Sqrt(max(h.m2, 0) / float64(h.n))
}

// Min and Max are the smallest and largest gap recorded.
func (h *GapHistogram) Min() float64 { return h.min }
func (h *GapHistogram) Max() float64 { return h.max }

// Quantile returns the q-quantile (q in [0, 1]; 0.99 = p99) in seconds:
// the geometric middle of the bucket holding the gap of rank ⌊q·(n−1)⌋,
// clamped to [Min, Max]. An empty histogram, or q outside [0, 1] or NaN,
// returns NaN.
func (h *GapHistogram) Quantile(q float64) float64 {
	if h.n == 0 || !(q >= 0 && q <= 1) {
		return math.NaN()
	}
	if q == 0 {
		return h.min
	}
	if q == 1 {
		return h.max
	}
	rank := int64(q * float64(h.n-1)) // 0-based
	clamp := func(v float64) float64 { return min(max(v, h.min), h.max) }
	if rank < h.under {
		return clamp(0)
	}
	cum := h.under
	for i, c := range h.counts {
		if cum += c; rank < cum {
			return clamp(gapMin * math.Pow(gapRatio, float64(i)+0.5))
		}
	}
	return h.max
}
