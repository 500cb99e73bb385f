package metrics

import (
	"math"
	"sort"
)

// sortFloats sorts xs ascending into exactly the order sort.Float64s
// gives, by a least-significant-digit radix sort on the floats' bits for
// slices long enough to gain from it: a summary sorts its TTFT, TPOT and
// latency lists once each, and with 12,000 requests the comparison sort
// was a few per cent of a short run. Floats whose bits are ordered like
// their values make the order the same; a NaN or a negative zero (whose
// order among equals sort.Float64s leaves to its algorithm) sends the
// slice to sort.Float64s instead, so the result never differs.
func sortFloats(xs []float64) {
	var keys []uint64
	sortFloatsWith(xs, &keys)
}

// sortFloatsWith is sortFloats with its scratch (two keys a float) in
// *scratch, grown when too small and left there for the next sort.
func sortFloatsWith(xs []float64, scratch *[]uint64) {
	if len(xs) < 256 {
		sort.Float64s(xs)
		return
	}
	if cap(*scratch) < 2*len(xs) {
		*scratch = make([]uint64, 2*len(xs))
	}
	keys := (*scratch)[:2*len(xs)]
	src, dst := keys[:len(xs)], keys[len(xs):]
	var counts [8][256]int
	for i, x := range xs {
		b := math.Float64bits(x)
		if x != x || b == 1<<63 {
			sort.Float64s(xs)
			return
		}
		if b>>63 == 0 {
			b |= 1 << 63 // non-negative: above every negative
		} else {
			b = ^b // negative: larger magnitudes lower
		}
		src[i] = b
		for d := range 8 {
			counts[d][byte(b>>(8*d))]++
		}
	}
	for d := range 8 {
		c := &counts[d]
		if c[byte(src[0]>>(8*d))] == len(src) {
			continue // every key has this digit: the pass would move nothing
		}
		at := 0
		for v, n := range c {
			c[v] = at
			at += n
		}
		for _, k := range src {
			v := byte(k >> (8 * d))
			dst[c[v]] = k
			c[v]++
		}
		src, dst = dst, src
	}
	for i, b := range src {
		if b>>63 == 1 {
			b &^= 1 << 63
		} else {
			b = ^b
		}
		xs[i] = math.Float64frombits(b)
	}
}
