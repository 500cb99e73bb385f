package stats

import (
	"math"
	"sort"
)

// Summary is a distribution as the stats report prints it. Percentiles use
// numpy's default (linear interpolation between closest ranks), like
// metrics.Percentile, so figures compare with Python notebooks.
type Summary struct {
	Count int     `json:"count"`
	Mean  float64 `json:"mean"`
	Min   float64 `json:"min"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	Max   float64 `json:"max"`
}

// Dist accumulates a distribution without keeping one entry per sample: it
// counts distinct values, so memory grows with the number of distinct values
// (bounded by the value range: token counts are integers below the longest
// context; times are kept at microsecond resolution), not with the number of
// lines. Mean, min and max are exact; percentiles are exact for integer data
// and exact to 1 µs for times.
type Dist struct {
	scale  float64 // value → key multiplier: 1 for integers, 1e6 for seconds
	counts map[int64]uint64
	n      uint64
	sum    float64
	min    float64
	max    float64
}

// NewIntDist is for integer-valued samples (token counts, turns).
func NewIntDist() *Dist { return &Dist{scale: 1, counts: map[int64]uint64{}} }

// NewTimeDist is for seconds, kept at microsecond resolution.
func NewTimeDist() *Dist { return &Dist{scale: 1e6, counts: map[int64]uint64{}} }

// Add records one sample.
func (d *Dist) Add(v float64) {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return
	}
	if d.n == 0 || v < d.min {
		d.min = v
	}
	if d.n == 0 || v > d.max {
		d.max = v
	}
	d.n++
	d.sum += v
	d.counts[int64(math.Round(v*d.scale))]++
}

// Summary computes mean and percentiles.
func (d *Dist) Summary() Summary {
	if d.n == 0 {
		return Summary{}
	}
	keys := make([]int64, 0, len(d.counts))
	for k := range d.counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	s := Summary{Count: int(d.n), Mean: d.sum / float64(d.n), Min: d.min, Max: d.max}
	s.P50 = d.percentile(keys, 50)
	s.P90 = d.percentile(keys, 90)
	s.P99 = d.percentile(keys, 99)
	return s
}

// percentile finds the samples at ranks floor(pos) and floor(pos)+1 of the
// sorted sample list (pos = q/100·(n−1)) by walking cumulative counts, then
// interpolates, exactly as numpy.percentile does on the expanded list.
func (d *Dist) percentile(keys []int64, q float64) float64 {
	pos := q / 100 * float64(d.n-1)
	lo := uint64(math.Floor(pos))
	frac := pos - float64(lo)
	a, b := d.at(keys, lo), d.at(keys, lo+1)
	if lo+1 >= d.n {
		b = a
	}
	return (a + frac*(b-a))
}

// at returns the value of the sample with the given 0-based rank.
func (d *Dist) at(keys []int64, rank uint64) float64 {
	var cum uint64
	for _, k := range keys {
		cum += d.counts[k]
		if rank < cum {
			return float64(k) / d.scale
		}
	}
	return float64(keys[len(keys)-1]) / d.scale
}
