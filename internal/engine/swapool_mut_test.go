package engine

import "testing"

// A model whose sliding layers have no window keeps no sliding pool,
// whatever the ratio: swaCapacity needs both a ratio and a window.
func TestMutSWAPoolNeedsAWindow(t *testing.T) {
	cfg := swaConfig(0.5, 1000)
	cfg.Profile.Timing.SlidingWindow = 0
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if w.SWACapacity() != 0 {
		t.Errorf("no window: sliding pool of %d tokens, want 0", w.SWACapacity())
	}
}

// The sliding pool's holds of one request, step by step, in a 500-token
// sliding pool (0.5 of 1,000) with a 32-token window.
//   - short: a 10-token prompt with 5 output tokens holds its whole context
//     as its window, min(10 + 5, 32) = 15, and its 10-token chunk while it
//     prefills: 25 at admission, 15 once it decodes.
//   - chunked: a 300-token prompt with a 256-token chunk budget holds
//     min(310, 32) = 32 and its first chunk min(300, 256) = 256 at
//     admission, 288; after that chunk what is left, 300 − 256 = 44: 76;
//     once it decodes, 32.
func TestMutSWAPoolHoldsStepByStep(t *testing.T) {
	for _, c := range []struct {
		name         string
		chunk, input int
		output       int
		holds        []int64
	}{
		{"short", 2048, 10, 5, []int64{25, 15}},
		{"chunked", 256, 300, 10, []int64{288, 76, 32}},
	} {
		cfg := swaConfig(0.5, 1000)
		cfg.ChunkTokens = c.chunk
		w, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		r := &Request{ID: 1, Kind: Full, Input: c.input, Output: c.output}
		w.Submit(0, r)
		w.Advance(0)
		for i, want := range c.holds {
			if i > 0 {
				next, _ := w.NextTime()
				w.Advance(next)
			}
			if got := w.SWAUsed(); got != want {
				t.Errorf("%s step %d (stage %d): %d sliding tokens held, want %d", c.name, i, r.Stage, got, want)
			}
		}
		drive(w, 0)
		if w.SWAUsed() != 0 {
			t.Errorf("%s: %d sliding tokens held when idle, want 0", c.name, w.SWAUsed())
		}
	}
}

// swaHoldOf of a Full request not yet queued (StageNew) counts its first
// chunk like a waiting one: min(300 + 10, 32) = 32 and min(300, 2048) =
// 300, 332 of the 500-token sliding pool. (Admission asks it of waiting
// requests; StageNew is the stage a request has before Submit.)
func TestMutSWAHoldOfANewRequest(t *testing.T) {
	w, err := New(swaConfig(0.5, 1000))
	if err != nil {
		t.Fatal(err)
	}
	r := &Request{ID: 1, Kind: Full, Input: 300, Output: 10}
	if r.Stage != StageNew {
		t.Fatalf("stage %d, want StageNew", r.Stage)
	}
	if got := w.swaHoldOf(r); got != 332 {
		t.Errorf("hold %d, want 332", got)
	}
}
