package kvc

import (
	"strings"
	"testing"
)

// The dispatcher's trace names every Begin and Reply (the conformance
// suite compares executors by it).
func TestTraceNamesBeginAndReply(t *testing.T) {
	x := kvcDispatcher(ResetDirect, 3)
	var calls []string
	x.SetTrace(func(c string) { calls = append(calls, c) })
	d := x.Begin(0, Request{Session: "s", Turn: 1, Blocks: []uint64{1, 2}, Input: 150, Output: 5})
	d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
	got := strings.Join(calls, "\n")
	for _, want := range []string{"Begin s/1 in=150 out=5", "Reply d0 can=true direct=false session-not-resident"} {
		if !strings.Contains(got, want) {
			t.Errorf("trace %q lacks %q", got, want)
		}
	}
}

// A pool of nine decoders is past the dispatch's inline tried set (8):
// Begin still asks one of them.
func TestNineDecoders(t *testing.T) {
	names := []string{"d0", "d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8"}
	x := NewDispatcher(DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1},
		TauReject: 3, TauAppend: 8192, MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack},
		[]string{"p0"}, names, Options{Alpha: 1}, Options{Alpha: 1})
	d := x.Begin(0, Request{Session: "s", Turn: 1, Blocks: []uint64{1}, Input: 100, Output: 5})
	if a := d.Action(); a.Kind != ActAdmit || a.D < 0 || a.D > 8 || len(d.tried) != 9 {
		t.Fatalf("nine decoders: %+v, tried %d, want an admission to one of nine", a, len(d.tried))
	}
}

// A colocated retry avoids the worker it names though that one holds the
// session: turn 1 (w0 avoided) lands on w1; turn 2, avoiding w1, goes to w0.
func TestColoRetryAvoids(t *testing.T) {
	x := NewDispatcher(DispatchConfig{Mechanism: MechColo, Policy: PolicyKVAware, Options: Options{Alpha: 1},
		TauReject: 3, TauAppend: 8192, MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack},
		nil, []string{"w0", "w1"}, Options{Alpha: 1}, Options{Alpha: 1})
	d := x.Begin(0, Request{Session: "s", Turn: 1, Blocks: seqBlocks(0, 4), Input: 256, Output: 5, Avoid: []int{0}})
	if a := d.Action(); a.Kind != ActColo || a.D != 1 {
		t.Fatalf("turn 1 avoiding w0: %+v, want colocated on w1", a)
	}
	d.Accepted()
	d.PrefillDone()
	d.Finished(true)
	d = x.Begin(1, Request{Session: "s", Turn: 2, Blocks: seqBlocks(0, 6), Input: 384, Output: 5, Avoid: []int{1}})
	if a := d.Action(); a.Kind != ActColo || a.D != 0 {
		t.Errorf("turn 2 avoiding w1: %+v, want colocated on w0", a)
	}
}

// With every decoder blacklisted (τ_reject 1) the least-rejected is asked,
// the lowest index among equals: refusals 1, 2, 2 ask d0; 2, 2, 1 ask d2;
// 1, 1, 2 ask d0.
func TestLeastRejectedWhenAllBlacklisted(t *testing.T) {
	for _, c := range []struct {
		rejects [3]int
		want    int
	}{{[3]int{1, 2, 2}, 0}, {[3]int{2, 2, 1}, 2}, {[3]int{1, 1, 2}, 0}} {
		x := kvcDispatcher(ResetOff, 1)
		s := x.session(SessionKey{ID: "s"})
		for d, n := range c.rejects {
			for range n {
				s.reject(d, 0, false)
			}
		}
		d := x.Begin(0, Request{Session: "s", Turn: 2, Blocks: []uint64{1, 2}, Input: 150, Output: 5})
		if a := d.Action(); a.Kind != ActAdmit || a.D != c.want {
			t.Errorf("rejects %v: %+v, want an admission to d%d", c.rejects, a, c.want)
		}
	}
}

// The admission to the decoder a session is pinned on carries what the
// router believes it holds; one to another decoder carries nothing.
func TestAdmissionCarriesResidentOnlyToThePin(t *testing.T) {
	x := kvcDispatcher(ResetDirect, 3)
	serve(t, x, 1, nil) // seeds on d0
	s := x.session(SessionKey{ID: "s"})
	if s.pin != 0 || s.resident <= 0 {
		t.Fatalf("after turn 1: pin d%d resident %d, want d0 and tokens", s.pin, s.resident)
	}
	d := x.Begin(0, Request{Session: "s", Turn: 2, Blocks: []uint64{1, 2, 12}, Input: 150, Output: 5})
	if a := d.Action(); a.D != 0 || a.Resident != s.resident {
		t.Fatalf("turn 2: %+v, want d0 with resident %d", a, s.resident)
	}
	d.Reply(AdmitReply{Reason: "no-space"})
	if a := d.Action(); a.Kind != ActAdmit || a.D == 0 || a.Resident != 0 {
		t.Errorf("after d0 refused: %+v, want another decoder with resident 0", a)
	}
	if p := strings.Join(d.Path(), "\n"); !strings.Contains(p, "reject d0: no-space") {
		t.Errorf("path %q lacks the refusal's reason", p)
	}
}

// With seed-max-inflight 1 a decoder with no seed in flight takes a seed.
func TestSeedCapAdmitsUnderIt(t *testing.T) {
	x := kvcDispatcher(ResetDirect, 3)
	x.cfg.SeedMaxInflight = 1
	d := x.Begin(0, Request{Session: "s", Turn: 1, Blocks: []uint64{1, 2}, Input: 150, Output: 5})
	d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
	if a := d.Action(); a.Kind != ActSeed || a.D != 0 {
		t.Errorf("no seed in flight on d0: %+v, want a seed to d0", a)
	}
}

// v3's typed rejects: a no-space refusal is the decoder's capacity, not
// the session's, and counts no reject against it; a session-cap refusal
// does.
func TestTypedRejectsCountOnlyTheSession(t *testing.T) {
	x := kvcDispatcher(ResetOff, 3)
	x.cfg.V3.TypedRejects = true
	d := x.Begin(0, Request{Session: "s", Turn: 1, Blocks: []uint64{1, 2}, Input: 150, Output: 5})
	d.Reply(AdmitReply{Reason: "no-space"})
	if got := x.Rejects("s", 0); got != 0 {
		t.Errorf("no-space: %d rejects on d0, want 0", got)
	}
	d.Reply(AdmitReply{Reason: "session-cap"})
	if got := x.Rejects("s", 1); got != 1 {
		t.Errorf("session-cap: %d rejects on d1, want 1", got)
	}
}

// Plain PD with every transfer breaker open goes to the decoder whose
// breaker opened first, the lowest index among equals; a closed breaker
// is chosen though it once opened earlier than the open ones.
func TestPlainPDBreakerOpenedFirst(t *testing.T) {
	for _, c := range []struct {
		opened [3]float64
		closed int // −1: all open
		want   int
	}{{[3]float64{1, 3, 2}, -1, 0}, {[3]float64{3, 2, 1}, -1, 2}, {[3]float64{1, 1, 2}, -1, 0}, {[3]float64{5, 3, 4}, 0, 0}} {
		x := NewDispatcher(DispatchConfig{Mechanism: MechPD, Policy: PolicyKVAware, Options: Options{Alpha: 1},
			TauReject: 3, TauAppend: 8192, MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack,
			Breaker: BreakerConfig{Failures: 1, WindowS: 10, CooldownS: 100}},
			[]string{"p0"}, []string{"d0", "d1", "d2"}, Options{Alpha: 1}, Options{Alpha: 1})
		for i, at := range c.opened {
			x.breakers[i].open, x.breakers[i].openedAt = i != c.closed, at
		}
		d := x.Begin(6, Request{Session: "s", Turn: 1, Blocks: []uint64{1, 2}, Input: 150, Output: 5})
		if a := d.Action(); a.Kind != ActPD || a.D != c.want {
			t.Errorf("opened at %v (closed d%d): %+v, want PD to d%d (path %v)", c.opened, c.closed, a, c.want, d.Path())
		}
		note := strings.Contains(strings.Join(d.Path(), "\n"), "opened first")
		if want := c.closed < 0; note != want {
			t.Errorf("opened at %v (closed d%d): the all-open note %v, want %v (path %v)", c.opened, c.closed, note, want, d.Path())
		}
	}
}

// A decoder added while a dispatch is in flight is not one it can ask
// (its tried set was sized at Begin): d0 refuses and the dispatch falls
// back to plain PD.
func TestDecoderAddedMidDispatch(t *testing.T) {
	x := NewDispatcher(DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1},
		TauReject: 3, TauAppend: 8192, MaxRetries: 5, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack},
		[]string{"p0"}, []string{"d0"}, Options{Alpha: 1}, Options{Alpha: 1})
	d := x.Begin(0, Request{Session: "s", Turn: 1, Blocks: []uint64{1, 2}, Input: 150, Output: 5})
	x.AddDecoder("d1")
	d.Reply(AdmitReply{Reason: "no-space"})
	if a := d.Action(); a.Kind != ActPD {
		t.Errorf("d0 refused, d1 added since: %+v (%s), want plain PD", a, d.Mode())
	}
}

// A seed its decoder's open breaker holds back, with no other decoder to
// ask, falls back to plain PD as a session not resident (no refusal gave
// a reason).
func TestBreakerHeldSeedFallsBackNotResident(t *testing.T) {
	x := NewDispatcher(DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1},
		TauReject: 3, TauAppend: 8192, MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack,
		Breaker: BreakerConfig{Failures: 1, WindowS: 10, CooldownS: 100}},
		[]string{"p0"}, []string{"d0"}, Options{Alpha: 1}, Options{Alpha: 1})
	x.breakers[0].open, x.breakers[0].openedAt = true, 1
	d := x.Begin(2, Request{Session: "s", Turn: 1, Blocks: []uint64{1, 2}, Input: 150, Output: 5})
	d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
	if a := d.Action(); a.Kind != ActPD || d.Mode() != "pd-router-fallback-session-not-resident" {
		t.Errorf("seed held by d0's breaker: %+v %s, want plain PD as pd-router-fallback-session-not-resident (path %v)", a, d.Mode(), d.Path())
	}
}

// v3's cold routing: a session no decoder holds goes to the decoder with
// the least work queued, d0 included, though the kv-aware pick (fewer in
// flight) names d1; a session pinned on d0 stays there whatever d0 has
// queued.
func TestColdRouteOnlyUnpinned(t *testing.T) {
	x := v3Dispatcher(V3Config{DBudgetTokens: 10000, ColdRoute: true})
	x.ensureLoad()
	x.load.d[1] = 1000
	x.d.inflight[0] = 1
	d := x.Begin(0, Request{Session: "a", Turn: 1, Blocks: []uint64{100, 101}, Input: 2000, Output: 10})
	if a := d.Action(); a.Kind != ActAdmit || a.D != 0 {
		t.Errorf("cold session, d1 with 1,000 tokens queued: %+v, want an admission to d0 (path %v)", a, d.Path())
	}

	x = v3Dispatcher(V3Config{DBudgetTokens: 10000, ColdRoute: true})
	coldTurn(t, x, "s", 200, 2000).Finished(true)
	if s := x.session(SessionKey{ID: "s"}); s.pin != 0 {
		t.Fatalf("turn 1 pinned on d%d, want d0", s.pin)
	}
	x.ensureLoad()
	x.load.d[0] = 100_000
	d = x.Begin(1, Request{Session: "s", Turn: 2, Blocks: []uint64{200, 201, 202}, Input: 3000, Output: 10})
	if a := d.Action(); a.Kind != ActAdmit || a.D != 0 {
		t.Errorf("session pinned on d0, 100,000 tokens queued there: %+v, want an admission to d0 (path %v)", a, d.Path())
	}
}
