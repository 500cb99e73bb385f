package engine

import "testing"

// A prefill step that carries the decode batch is one forward: the batch
// adds its per-sequence and context terms, not a second expert read.
func TestMixedStepReadsExpertsOnce(t *testing.T) {
	p := testProfile(t)
	tm := p.Timing
	w, _ := New(Config{Name: "c", Profile: p, BlockSize: 64, PrefixCache: true, MixedChunk: true})
	a := &Request{ID: 1, Kind: Full, Blocks: []uint64{1, 2}, Input: 100, Output: 50}
	w.Submit(0, a)
	_ = advanceTo(w, 0)
	t0, _ := w.NextTime() // a's prefill step ends; a decodes from here
	w.Advance(t0)
	b := &Request{ID: 2, Kind: Full, Blocks: []uint64{3, 4, 5}, Input: 150, Output: 5}
	w.Submit(t0, b) // the run planned at t0 is replanned at once: b's prefill step carries a
	t1, _ := w.NextTime()
	ctx := int64(100 + 1)
	want := tm.PrefillS(150, 0) + tm.DecodePerSeqS + tm.DecodePerCtxTokenS*float64(ctx)
	if got := t1 - t0; !near(got, want) {
		t.Fatalf("mixed step %v, want prefill %v + one sequence's decode work without experts = %v (the old charge was %v)",
			got, tm.PrefillS(150, 0), want, tm.PrefillS(150, 0)+tm.DecodeWorkS(p.Model, 1, ctx))
	}
}

// Requests submitted at the same instant share the first prefill step, as in
// one pass of SGLang's scheduler loop.
func TestSimultaneousArrivalsShareAStep(t *testing.T) {
	p := testProfile(t)
	w, _ := New(Config{Name: "c", Profile: p, BlockSize: 64, PrefixCache: true})
	for i := int64(0); i < 3; i++ {
		w.Submit(0, &Request{ID: i, Kind: Full, Blocks: []uint64{uint64(10 * (i + 1))}, Input: 60, Output: 1})
	}
	_, evs := drive(w, 0)
	want := p.Timing.PrefillStepS() + 3*p.Timing.PrefillWorkS(60, 0)
	for _, ev := range evs {
		if ev.Kind == EvFinished && !near(ev.Time, want) {
			t.Fatalf("request %d finished at %v, want all three in one step ending %v", ev.Req.ID, ev.Time, want)
		}
	}
	if w.Stats().PrefillSteps != 1 {
		t.Fatalf("%d prefill steps, want 1", w.Stats().PrefillSteps)
	}
}

// An aborted decode (a timeout) reports the tokens of the steps it ran,
// even mid-run, not the count at the run's start.
func TestAbortCreditsStepsRun(t *testing.T) {
	p := testProfile(t)
	step := func(ctx int64) float64 { return p.Timing.DecodeStepS(p.Model, 1, ctx) }
	w, _ := New(Config{Name: "d", Role: RoleDecode, Profile: p, BlockSize: 64})
	r := &Request{ID: 1, Kind: DecodeOnly, Input: 1000, Output: 100}
	w.Reserve(0, r)
	w.StartDecode(0, r)
	w.Advance(0) // joins with its first token; one run of 99 steps planned
	at := step(1001) + step(1002) + step(1003) + step(1004)/2
	if got := w.GeneratedBy(at, r); got != 4 {
		t.Fatalf("GeneratedBy mid-run = %d, want 1 + 3 whole steps", got)
	}
	w.Abort(at, r)
	if r.Generated() != 4 {
		t.Fatalf("aborted request generated %d, want 4", r.Generated())
	}
	if w.Used() != 0 || w.Reserved() != 0 {
		t.Fatalf("abort left used %d reserved %d", w.Used(), w.Reserved())
	}
}

// advanceTo runs every step due by now.
func advanceTo(w *Worker, now float64) []Event {
	var evs []Event
	for {
		t, ok := w.NextTime()
		if !ok || t > now {
			return evs
		}
		w.Advance(t)
		evs = append(evs, w.TakeEvents()...)
	}
}

// A one-token PD request ends the moment it joins D (its only token came
// from P); the slot it frees must go to the next reservation at once. A
// decode worker once went idle with reservations queued behind it.
func TestOneTokenJoinGrantsNextReservation(t *testing.T) {
	w, _ := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, MaxRunning: 1})
	a := &Request{ID: 1, Kind: DecodeOnly, Input: 100, Output: 1}
	b := &Request{ID: 2, Kind: DecodeOnly, Input: 100, Output: 1}
	w.Reserve(0, a)
	w.Reserve(0, b)
	if b.Stage != StageWaiting {
		t.Fatalf("b stage %d, want waiting behind max_running 1", b.Stage)
	}
	w.StartDecode(0, a)
	advanceTo(w, 0)
	if b.Stage != StageReserved {
		t.Fatalf("after a finished on joining, b is in stage %d, want reserved", b.Stage)
	}
}
