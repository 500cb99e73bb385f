package kvc

import "testing"

// A single worker's pick still reports what it holds of the prompt and
// whether the session is pinned there.
func TestRouterSingleWorkerOverlapAndSticky(t *testing.T) {
	r := NewRouter([]string{"w0"}, PolicyKVAware, Options{Alpha: 1})
	r.Dispatched(0, "s", []uint64{1, 2, 3})
	if d := r.Pick("s", []uint64{1, 2, 3, 4}); d.Worker != 0 || d.Overlap != 3 || !d.Sticky {
		t.Errorf("pinned session: %+v, want w0, overlap 3, sticky", d)
	}
	if d := r.Pick("u", []uint64{1, 2}); d.Worker != 0 || d.Overlap != 2 || d.Sticky {
		t.Errorf("another session: %+v, want w0, overlap 2, not sticky", d)
	}
}

// Done on a worker with nothing in flight keeps its count at 0.
func TestRouterDoneAtZero(t *testing.T) {
	r := NewRouter([]string{"w0", "w1"}, PolicyKVAware, Options{Alpha: 1})
	r.Dispatched(1, "s", []uint64{1})
	r.Done(1)
	r.Done(1)
	r.Done(0)
	if a, b := r.Inflight(0), r.Inflight(1); a != 0 || b != 0 {
		t.Errorf("in flight %d, %d after more Done than dispatches, want 0, 0", a, b)
	}
}

// With a worker out of service the caller's own filter still holds: w2
// down and w0 not allowed leave w1.
func TestRouterPickAmongWithOneOut(t *testing.T) {
	r := NewRouter([]string{"w0", "w1", "w2"}, PolicyKVAware, Options{Alpha: 1})
	r.SetDown(2, true)
	if d := r.PickAmong("s", []uint64{1}, func(i int) bool { return i != 0 }); d.Worker != 1 {
		t.Errorf("w2 down, w0 not allowed: w%d, want w1", d.Worker)
	}
}

// The load floor (FloorK 1), by hand. With no dispatch yet (mean 0) there
// is no floor: w1, holding the prompt's 2 blocks (a probe's report), wins
// on overlap. With 3 dispatches on w0 and 1 on w1 (mean 2), a prompt w0
// holds 1 block of scores 1 there and 0 + 1·(2 − 1)/2 = 0.5 on w1: w0.
func TestRouterLoadFloorByHand(t *testing.T) {
	r := NewRouter([]string{"w0", "w1"}, PolicyKVAware, Options{Alpha: 1, FloorK: 1})
	r.PinTo(1, "a", []uint64{1, 2})
	if d := r.Pick("b", []uint64{1, 2}); d.Worker != 1 {
		t.Errorf("mean 0: w%d, want w1 (2 blocks held)", d.Worker)
	}
	r = NewRouter([]string{"w0", "w1"}, PolicyKVAware, Options{Alpha: 1, FloorK: 1})
	for i, w := range []int{0, 0, 0, 1} {
		r.Dispatched(w, string(rune('a'+i)), []uint64{uint64(10 + i)})
	}
	if d := r.Pick("e", []uint64{10}); d.Worker != 0 {
		t.Errorf("assigned 3 and 1, w0 holds 1 block: w%d, want w0 (1 against 0.5)", d.Worker)
	}
}
