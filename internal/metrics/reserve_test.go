package metrics

import (
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// One radix-sort scratch reused across lists (a summary's TTFT, TPOT and
// latency lists) sorts each as a fresh scratch does: a longer list's stale
// keys left in it, a shorter list after it, a NaN list's fallback between.
func TestSortFloatsScratchReused(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var scratch []uint64
	for _, n := range []int{5000, 300, 12031, 256, 4000, 1000, 7000} {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = rng.ExpFloat64() * float64(1+rng.IntN(1000))
			if n == 4000 && i == 17 {
				xs[i] = math.NaN()
			}
		}
		want := slices.Clone(xs)
		sort.Float64s(want)
		sortFloatsWith(xs, &scratch)
		for i := range xs {
			if math.Float64bits(xs[i]) != math.Float64bits(want[i]) {
				t.Fatalf("n=%d: at %d got %v, want %v", n, i, xs[i], want[i])
			}
		}
		if cap(scratch) < 2*n && n != 4000 {
			t.Fatalf("n=%d: scratch has room for %d keys, want at least %d", n, cap(scratch), 2*n)
		}
	}
}

// Reserve leaves every figure of the summary as it is and keeps the lists
// in the arrays it made: no growth while the reserved requests end.
func TestCollectorReserve(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	recs := make([]Record, 3000)
	for i := range recs {
		r := &recs[i]
		r.Status = StatusCompleted
		if i%97 == 0 {
			r.Status = StatusTimeout
		}
		r.ArrivalS = float64(i) * 0.01
		r.TTFTS = rng.ExpFloat64()
		r.LatencyS = r.TTFTS + rng.ExpFloat64()
		r.OutputLength = 1 + rng.IntN(3)
		r.TPOTS = rng.ExpFloat64() * 0.01
		r.InputLength = 100
	}
	plain, reserved := NewCollector(SLO{}), NewCollector(SLO{})
	reserved.Reserve(len(recs))
	if cap(reserved.ttft) < len(recs) || cap(reserved.tpot) < len(recs) || cap(reserved.latency) < len(recs) {
		t.Fatalf("Reserve(%d) left room for %d, %d, %d", len(recs), cap(reserved.ttft), cap(reserved.tpot), cap(reserved.latency))
	}
	arrays := [3]*float64{&reserved.ttft[:1][0], &reserved.tpot[:1][0], &reserved.latency[:1][0]}
	for i := range recs {
		plain.Add(&recs[i])
		reserved.Add(&recs[i])
	}
	if got := [3]*float64{&reserved.ttft[:1][0], &reserved.tpot[:1][0], &reserved.latency[:1][0]}; got != arrays {
		t.Fatal("a list grew into a new array after Reserve")
	}
	a, b := plain.Summary(0), reserved.Summary(0)
	if !summariesEqual(a, b) {
		t.Fatalf("summary with Reserve differs:\n%+v\n%+v", a, b)
	}
	reserved.Reserve(0) // no-op
	reserved.Reserve(-1)
}

func summariesEqual(a, b Summary) bool {
	return a.TTFTStats == b.TTFTStats && a.TPOTStats == b.TPOTStats && a.LatencyStats == b.LatencyStats &&
		a.Requests == b.Requests && a.Completed == b.Completed && a.Errors == b.Errors && a.DurationS == b.DurationS
}
