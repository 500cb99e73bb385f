package engine

import "testing"

// The closed-form guess of how many decode steps fit in a span is within
// one step of the exact count, found here by adding step costs one by one.
// stepsWithin corrects any guess, so only this test holds the guess's
// accuracy, which keeps stepsWithin O(1) a call.
func TestGuessStepsExact(t *testing.T) {
	for _, tc := range []struct{ base, slope float64 }{
		{0.010, 0},        // flat steps
		{0.006, 0.000002}, // the context grows slowly
		{0.008, 0.0005},   // quickly
		{0.0003, 0.004},   // the slope dominates the base
	} {
		p := stepPlan{base: tc.base, slope: tc.slope}
		for _, exact := range []int{0, 1, 2, 7, 100, 5000} {
			// elapsed halfway between the end of step exact and of exact+1
			k := float64(exact)
			end := k*tc.base + tc.slope*k*(k-1)/2
			next := end + tc.base + tc.slope*k
			elapsed := (end + next) / 2
			if g := p.guessSteps(elapsed); g < exact-1 || g > exact+1 {
				t.Errorf("base %v slope %v: %v s holds %d whole steps, guess %d", tc.base, tc.slope, elapsed, exact, g)
			}
		}
	}
}
