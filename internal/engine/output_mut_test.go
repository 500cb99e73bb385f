package engine

import "testing"

// A finished turn keeps as its tail every output token but the last (the
// last was sampled, never run through the model): 2 generated tokens leave
// a 1-token tail, 1 leaves none.
func TestKeepOutputTwoTokensLeaveOne(t *testing.T) {
	for _, c := range []struct {
		output int
		tail   int64
	}{{2, 1}, {1, 0}, {3, 2}} {
		w := hiWorker(t, 4096, 0, WriteThrough)
		turn(t, w, 0, 1, "a", chain(1, 4), 64, c.output)
		if w.tailTokens != c.tail || (c.tail > 0) != (w.tails["a"] != nil) {
			t.Fatalf("output %d: tail of %d tokens (%v), want %d", c.output, w.tailTokens, w.tails["a"], c.tail)
		}
	}
}
