package metrics

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// sortFloats gives sort.Float64s's order, bit for bit, on every shape a
// latency list takes and on the values that would tell them apart.
func TestSortFloatsMatchesSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	gens := map[string]func(int) float64{
		"latencies": func(int) float64 { return rng.ExpFloat64() * 0.3 },
		"wide":      func(int) float64 { return math.Ldexp(rng.Float64(), rng.IntN(200)-100) },
		"signed":    func(int) float64 { return rng.NormFloat64() * 1e3 },
		"few values": func(int) float64 {
			return float64(rng.IntN(4)) * 0.125
		},
		"equal":    func(int) float64 { return 0.25 },
		"zeros":    func(int) float64 { return 0 },
		"sorted":   func(i int) float64 { return float64(i) },
		"reversed": func(i int) float64 { return -float64(i) },
		"extremes": func(i int) float64 {
			return []float64{math.Inf(1), math.Inf(-1), math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, 5e-324, 1}[i%7]
		},
		"with -0":    func(i int) float64 { return []float64{0, math.Copysign(0, -1), 1, -1}[rng.IntN(4)] },
		"with NaN":   func(i int) float64 { return []float64{math.NaN(), 2, -2, 0}[rng.IntN(4)] },
		"subnormals": func(int) float64 { return math.Float64frombits(rng.Uint64N(1 << 52)) },
	}
	for name, gen := range gens {
		for _, n := range []int{0, 1, 255, 256, 257, 1000, 12031} {
			xs := make([]float64, n)
			for i := range xs {
				xs[i] = gen(i)
			}
			want := slices.Clone(xs)
			sort.Float64s(want)
			sortFloats(xs)
			for i := range xs {
				if math.Float64bits(xs[i]) != math.Float64bits(want[i]) && !(math.IsNaN(xs[i]) && math.IsNaN(want[i])) {
					t.Fatalf("%s, %d values: [%d] = %v (%#x), sort.Float64s has %v (%#x)", name, n, i, xs[i], math.Float64bits(xs[i]), want[i], math.Float64bits(want[i]))
				}
			}
		}
	}
}

// BenchmarkDescribe is a summary's work on one list of 12,000 latencies.
//
//	go test ./internal/metrics -run '^$' -bench Describe -cpu 1
func BenchmarkDescribe(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	src := make([]float64, 12000)
	for i := range src {
		src[i] = rng.ExpFloat64() * 2
	}
	xs := make([]float64, len(src))
	b.ReportAllocs()
	for b.Loop() {
		copy(xs, src)
		Describe(xs)
	}
}
