package engine

import (
	"math"
	"testing"
)

// The mutation run's survivors in schedule.go (docs/mutation.md, "engine,
// schedule.go, admission.go, …"): every expectation below is worked out by
// hand from the scheduler's rules, with roundProfile's step costs
// (vllm_test.go) or a plan whose costs are powers of two, so that step
// boundaries are exact in floating point.

// At the midpoint between two step ends the closed form is exact, not
// within one step: the root of base·k + slope·k(k−1)/2 = elapsed lies
// between exact and exact+1 there, half a step from either.
func TestGuessStepsAtHalfSteps(t *testing.T) {
	for _, tc := range []struct{ base, slope float64 }{
		{0.006, 0.000002}, {0.008, 0.0005}, {0.0003, 0.004}, {0.25, 0.25},
	} {
		p := stepPlan{base: tc.base, slope: tc.slope}
		for _, exact := range []int{0, 1, 2, 7, 100, 5000} {
			k := float64(exact)
			end := k*tc.base + tc.slope*k*(k-1)/2
			next := end + tc.base + tc.slope*k
			if g := p.guessSteps((end + next) / 2); g != exact {
				t.Errorf("base %v slope %v: halfway past step %d the guess is %d", tc.base, tc.slope, exact, g)
			}
		}
	}
}

// stepsWithin corrects a guess that is off either way. base = slope =
// 1/4: the steps end at 1/4, 3/4 (= 1/2 + 1/4), 3/2; just under 3/4 one
// whole step fits, and the closed form rounds to 2 there. A negative slope
// (−1/16) makes the a ≤ 0 branch guess ⌊e/base⌋, short of the count: the
// steps end at 1/4, 7/16 (1/2 − 1/16), 9/16 (3/4 − 3/16), so at exactly
// 7/16 two fit where the guess says ⌊1.75⌋ = 1, and the run's length caps
// the count.
func TestStepsWithinCorrectsTheGuess(t *testing.T) {
	for _, tc := range []struct {
		base, slope, elapsed float64
		k, want              int
	}{
		{0.25, 0.25, math.Nextafter(0.75, 0), 10, 1},
		{0.25, 0.25, 0.75, 10, 2},
		{0.25, 0.25, 1.5, 10, 3},
		{0.25, 0.25, 1.5, 2, 2},
		{0.25, -0.0625, 0.4375, 10, 2},
		{0.25, -0.0625, 0.5, 10, 2},
		{0.25, -0.0625, 0.5625, 10, 3},
		{0.25, -0.0625, 0.5625, 2, 2},
	} {
		w := &Worker{plan: stepPlan{base: tc.base, slope: tc.slope, decodeK: tc.k}}
		if got := w.stepsWithin(tc.elapsed); got != tc.want {
			t.Errorf("base %v slope %v, run of %d: %v s holds %d whole steps, got %d", tc.base, tc.slope, tc.k, tc.elapsed, tc.want, got)
		}
	}
}

// wake cuts a decode run at the step boundary at or after now. A run of 5
// steps from t = 1 with base = slope = 1/4 ends its steps at 1.25, 1.75,
// 2.5, 3.5, 4.75: work arriving exactly at 1.25 ends the run there (one
// step), at 1.5 or exactly 1.75 after two, at 2 after three; at 4 the run
// is cut to 5 steps, which it already is.
func TestWakeCutsAtTheStepBoundary(t *testing.T) {
	for _, tc := range []struct {
		now     float64
		k       int
		stepEnd float64
	}{
		{1.25, 1, 1.25}, {1.5, 2, 1.75}, {1.75, 2, 1.75}, {2, 3, 2.5}, {4, 5, 4.75},
	} {
		w := &Worker{busy: true, stepStart: 1, stepEnd: 4.75, plan: stepPlan{base: 0.25, slope: 0.25, decodeK: 5}}
		w.wake(tc.now)
		if w.plan.decodeK != tc.k || w.stepEnd != tc.stepEnd {
			t.Errorf("work at %v: run of %d steps ending %v, want %d ending %v", tc.now, w.plan.decodeK, w.stepEnd, tc.k, tc.stepEnd)
		}
	}
}

// A single decode step is not replanned when work arrives the instant it
// starts: the new prompt waits for its end. roundProfile: A's prefill of
// 100 tokens is 0.010 + 100·1e-4 = 0.020 s; its one remaining token a
// decode step of 0.005 + 0.001 = 0.006 s, to 0.026; B's prefill of 100
// then ends at 0.046, with B's only token. The worker was busy 0.046 s in
// all. Advance accepts a time up to 1e-9 s short of the step's end.
func TestSingleDecodeStepKeepsNewWorkWaiting(t *testing.T) {
	w, err := New(Config{Name: "c", Profile: roundProfile("sglang"), BlockSize: 16, ChunkTokens: 1000, PoolTokens: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	a := &Request{ID: 1, Kind: Full, Input: 100, Output: 2}
	b := &Request{ID: 2, Kind: Full, Input: 100, Output: 1}
	w.Submit(0, a)
	w.Advance(0)
	t1, _ := w.NextTime()
	func() {
		defer func() {
			if p := recover(); p != nil {
				t.Fatalf("Advance 1e-9 s before the step's end: %v", p)
			}
		}()
		w.Advance(t1 - 1e-9)
	}()
	if !near(t1, 0.020) || !near(a.FirstTokenAt, 0.020) {
		t.Fatalf("A's prefill ended at %v (first token %v), want 0.020", t1, a.FirstTokenAt)
	}
	w.Submit(a.FirstTokenAt, b)
	_, done := times(w)
	if !near(done[1], 0.026) || !near(b.FirstTokenAt, 0.046) || !near(done[2], 0.046) {
		t.Fatalf("A done %v, B's first token %v, done %v; want 0.026, 0.046, 0.046", done[1], b.FirstTokenAt, done[2])
	}
	if got := w.Stats().BusyS; !near(got, 0.046) {
		t.Fatalf("busy %v s, want 0.046", got)
	}
}

// A PrefillOnly request reports each chunk it finishes short of its
// prompt's end, with the tokens held so far: X's 128 tokens (two blocks)
// are cached when Y, sharing them, computes its other 128 in chunks of
// 100 and 28; after the first chunk Y holds 128 + 100 = 228.
func TestPrefillOnlyChunkDoneCountsCachedTokens(t *testing.T) {
	w, err := New(Config{Name: "p", Role: RolePrefill, Profile: roundProfile("sglang"), BlockSize: 64, ChunkTokens: 100,
		PrefixCache: true, PoolTokens: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	x := &Request{ID: 1, Kind: PrefillOnly, Blocks: []uint64{1, 2}, Input: 128, Output: 1}
	y := &Request{ID: 2, Kind: PrefillOnly, Blocks: []uint64{1, 2, 3, 4}, Input: 256, Output: 1}
	w.Submit(0, x)
	end, _ := drive(w, 0)
	w.Submit(end, y)
	_, evs := drive(w, end)
	var chunks []int
	for _, ev := range evs {
		if ev.Kind == EvChunkDone {
			if ev.Req != y {
				t.Fatalf("chunk done for request %d", ev.Req.ID)
			}
			chunks = append(chunks, ev.Tokens)
		}
	}
	if y.CachedTokens != 128 || len(chunks) != 1 || chunks[0] != 228 {
		t.Fatalf("Y cached %d, chunk reports %v; want 128 cached and one report of 228", y.CachedTokens, chunks)
	}
}

// A chunked prompt's last chunk leaves the rest of the step's budget to the
// queue: A's 150 tokens take 100, then 50 with B's 20 in the same step
// (0.010 + 70·1e-4 = 0.017 s, to 0.037), where both first tokens come. A
// prompt that fills the budget exactly leaves none: B is admitted at the
// next step, 0.020.
func TestLastChunkSharesItsStep(t *testing.T) {
	for _, tc := range []struct {
		inputA         int
		admitB, firstB float64
	}{
		{150, 0.020, 0.037},
		{100, 0.020, 0.032}, // B alone: 0.010 + 20·1e-4
	} {
		w, err := New(Config{Name: "c", Profile: roundProfile("sglang"), BlockSize: 16, ChunkTokens: 100, PoolTokens: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		a := &Request{ID: 1, Kind: Full, Input: tc.inputA, Output: 1}
		b := &Request{ID: 2, Kind: Full, Input: 20, Output: 1}
		w.Submit(0, a)
		w.Submit(0, b)
		drive(w, 0)
		if !near(b.AdmittedAt, tc.admitB) || !near(b.FirstTokenAt, tc.firstB) {
			t.Errorf("A of %d: B admitted at %v, first token %v; want %v, %v", tc.inputA, b.AdmittedAt, b.FirstTokenAt, tc.admitB, tc.firstB)
		}
	}
}

// Work counts one look per admission attempt on a worker without a prefix
// cache or an order: three prompts admitted in one step are three looks.
func TestWorkCountsAdmissionAttempts(t *testing.T) {
	w, err := New(Config{Name: "c", Profile: roundProfile("sglang"), BlockSize: 16, ChunkTokens: 1000, PoolTokens: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= 3; i++ {
		w.Submit(0, &Request{ID: i, Kind: Full, Input: 10, Output: 1})
	}
	drive(w, 0)
	if got := w.Work(); got != 3 {
		t.Fatalf("work %d, want 3", got)
	}
}

// bypassRun starts A's 320-token prompt at 0 (chunks of 100: its first
// step ends at 0.010 + 100·1e-4 = 0.020) and queues the short prompts at
// 0.001; it returns when each short one was admitted, with the waiting
// requests the scheduler looked at (schedWork, a part of Work) up to the
// planning of the second step.
func bypassRun(t *testing.T, shortest bool, maxRun int, inputs []int) ([]float64, uint64) {
	t.Helper()
	w, err := New(Config{Name: "d", Profile: roundProfile("sglang"), BlockSize: 16, ChunkTokens: 100, PoolTokens: 1 << 20,
		MaxRunning: maxRun, PrefixCache: true, ShortestFirst: shortest, Session: SessionConfig{Enabled: true, BypassTokens: 40}})
	if err != nil {
		t.Fatal(err)
	}
	w.Submit(0, &Request{ID: 1, Kind: Full, Blocks: chain(1, 20), Input: 320, Output: 1})
	w.Advance(0)
	var rs []*Request
	for i, in := range inputs {
		r := &Request{ID: int64(10 + i), Kind: Full, Blocks: chain(uint64(10+i), (in+15)/16), Input: in, Output: 1}
		rs = append(rs, r)
		if err := w.Submit(0.001, r); err != nil {
			t.Fatal(err)
		}
	}
	t1, _ := w.NextTime()
	w.Advance(t1)
	work := w.schedWork
	drive(w, t1)
	var at []float64
	for _, r := range rs {
		at = append(at, r.AdmittedAt)
	}
	return at, work
}

// The bypass admits, in arrival order, the waiting prompts whose uncached
// tokens fit in the room left (40): 16 (room 24), 16 (room 8), then not
// 16; with shortest first 16 before 24, then 24 (exactly the room left).
// A's chunks run to 0.020, 0.040 (with what bypassed: their first tokens
// come in it), 0.060, then A's last 20 tokens take the rest. With
// MaxRunning 2 only one rides past A. The looks: one at A, then one per
// prompt the bypass weighed: 16, 16, 16 (the last refused) → 4; 16, then
// the second stops at MaxRunning → 3; shortest first 16, 24 → 3; 16 alone
// (MaxRunning then reached) → 2.
func TestBypassByHand(t *testing.T) {
	const second = 0.020 // the step the bypass rides in starts here
	for _, tc := range []struct {
		name     string
		shortest bool
		maxRun   int
		inputs   []int
		bypassed []bool
		looks    uint64
	}{
		{"arrival order", false, 64, []int{16, 16, 16}, []bool{true, true, false}, 4},
		{"arrival order, MaxRunning 2", false, 2, []int{16, 16}, []bool{true, false}, 3},
		{"shortest first", true, 64, []int{24, 16, 48}, []bool{true, true, false}, 3},
		{"shortest first, MaxRunning 2", true, 2, []int{24, 16}, []bool{false, true}, 2},
	} {
		at, work := bypassRun(t, tc.shortest, tc.maxRun, tc.inputs)
		for i, want := range tc.bypassed {
			if got := near(at[i], second); got != want {
				t.Errorf("%s: prompt %d of %d tokens admitted at %v; bypassed %v, want %v", tc.name, i, tc.inputs[i], at[i], got, want)
			}
		}
		if work != tc.looks {
			t.Errorf("%s: %d looks at waiting requests, want %d", tc.name, work, tc.looks)
		}
	}
}

// A bypass that used its room up to the token looks at no one more: in
// arrival order, with 16 + 24 = 40 taken, the third prompt queued behind
// is not weighed (1 look at A + 2). Shortest first takes 16 and 16 (room
// 8) and stops at the heap's head, 24, without a look: 3 as well.
func TestBypassStopsAtNoRoom(t *testing.T) {
	for _, shortest := range []bool{false, true} {
		if _, looks := bypassRun(t, shortest, 64, []int{16, 24, 16}); looks != 3 {
			t.Errorf("shortest first %v: %d looks, want 3", shortest, looks)
		}
	}
}
