package report

import "math"

// Occupancy summarises KV pool occupancy across workers in n equal time
// buckets. Each worker's occupancy is a step function (it holds a sample's
// level until the next sample), averaged over the part of the bucket after
// its first sample; mean and max are then taken over the workers seen in the
// bucket. Averaging within buckets, rather than sampling instants, keeps
// short spikes from aliasing into a comb. Mean says how full the pool is;
// max says whether one worker is the bottleneck. t is each bucket's middle.
func Occupancy(ws []WorkerSeries, n int) (t, mean, max []float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, w := range ws {
		if len(w.T) > 0 {
			lo = math.Min(lo, w.T[0])
			hi = math.Max(hi, w.T[len(w.T)-1])
		}
	}
	if math.IsInf(lo, 1) || n < 1 {
		return nil, nil, nil
	}
	if hi == lo {
		var sum, mx float64
		for _, w := range ws {
			if len(w.T) > 0 {
				v := w.Occ[len(w.Occ)-1]
				sum, mx = sum+v, math.Max(mx, v)
			}
		}
		return []float64{lo}, []float64{sum / float64(len(ws))}, []float64{mx}
	}
	width := (hi - lo) / float64(n)
	sum := make([]float64, n)
	cnt := make([]int, n)
	mx := make([]float64, n)
	for _, w := range ws {
		k := 0 // the sample in force at the bucket's start
		for b := 0; b < n; b++ {
			a, e := lo+width*float64(b), lo+width*float64(b+1)
			var area, covered float64
			for ; k < len(w.T); k++ {
				segEnd := hi
				if k+1 < len(w.T) {
					segEnd = w.T[k+1]
				}
				s0, s1 := math.Max(w.T[k], a), math.Min(segEnd, e)
				if s1 > s0 {
					area += w.Occ[k] * (s1 - s0)
					covered += s1 - s0
				}
				if segEnd > e {
					break // this sample is still in force in the next bucket
				}
			}
			if covered > 0 {
				v := area / covered
				sum[b] += v
				cnt[b]++
				mx[b] = math.Max(mx[b], v)
			}
		}
	}
	for b := 0; b < n; b++ {
		if cnt[b] == 0 {
			continue
		}
		t = append(t, lo+width*(float64(b)+0.5))
		mean = append(mean, sum[b]/float64(cnt[b]))
		max = append(max, mx[b])
	}
	return t, mean, max
}

// decodeSide keeps the decode and colocated workers: that is where
// sessions' KV lives between turns. Runs without role labels keep all.
func decodeSide(ws []WorkerSeries) []WorkerSeries {
	var out []WorkerSeries
	for _, w := range ws {
		if w.Role == "decode" || w.Role == "colocated" {
			out = append(out, w)
		}
	}
	if len(out) == 0 {
		return ws
	}
	return out
}

// naturalLess orders worker names so "d10" follows "d9".
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		ad, bd := isDigit(a[0]), isDigit(b[0])
		if ad && bd {
			i, j := digits(a), digits(b)
			na, nb := trimZeros(a[:i]), trimZeros(b[:j])
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			a, b = a[i:], b[j:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func digits(s string) int {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}

func trimZeros(s string) string {
	for len(s) > 1 && s[0] == '0' {
		s = s[1:]
	}
	return s
}
