package kvc

import "testing"

// Small helpers' bounds that mutation testing found no test of (decoderpath.go,
// rejects.go, residency.go), every figure by hand.

// RouterAdmit's large-append check: with τ_append 100 and 1,000 tokens
// believed resident, an append of exactly 100 is direct and 101 refused;
// with no τ_append (0) nothing is refused.
func TestRouterAdmitAppendBound(t *testing.T) {
	for _, c := range []struct {
		input, maxAppend int
		want             AdmitReply
	}{
		{1100, 100, AdmitReply{CanAdmit: true, Direct: true}},
		{1101, 100, AdmitReply{Reason: "real-large-append"}},
		{5000, 0, AdmitReply{CanAdmit: true, Direct: true}},
	} {
		if got := RouterAdmit(PathLocalPrefill, true, c.input, Action{MaxAppend: c.maxAppend, Resident: 1000}); got != c.want {
			t.Errorf("input %d, τ_append %d: %+v, want %+v", c.input, c.maxAppend, got, c.want)
		}
	}
}

// A capability function is asked of every worker index from 0, and only
// the index −1 (no worker) is allowed without asking.
func TestWorkerCapsAskedFromIndexZero(t *testing.T) {
	no := func(int) bool { return false }
	x := NewDispatcher(DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1}, BlockSize: 64,
		Workers: WorkerCaps{LocalOnD: no, WholeOnP: no, KeepsOnD: no}},
		[]string{"p0"}, []string{"d0"}, Options{Alpha: 1}, Options{Alpha: 1})
	for _, c := range []struct {
		name string
		f    func(int) bool
	}{{"localOnD", x.localOnD}, {"wholeOnP", x.wholeOnP}, {"keepsOnD", x.keepsOnD}} {
		if c.f(0) || c.f(1) || !c.f(-1) {
			t.Errorf("%s: worker 0 %t, 1 %t, none %t; want false, false, true", c.name, c.f(0), c.f(1), c.f(-1))
		}
	}
}

// τ_reject's blacklist at its bounds: τ_reject 0 blacklists nothing (two
// refusals counted); τ_reject 2 blacklists at two, not one. With a 10 s
// window a refusal exactly 10 s old no longer counts, one 9.5 s old does.
func TestRejectBounds(t *testing.T) {
	for _, tau := range []int{0, 2} {
		x := v3Dispatcher(V3Config{})
		x.cfg.TauReject = tau
		s := &sessState{}
		s.reject(0, 0, false)
		if x.blacklisted(s, 0, 0) {
			t.Errorf("τ_reject %d: blacklisted after one refusal", tau)
		}
		s.reject(0, 0, false)
		if got := x.blacklisted(s, 0, 0); got != (tau == 2) {
			t.Errorf("τ_reject %d: blacklisted %t after two refusals", tau, got)
		}
	}
	x := v3Dispatcher(V3Config{})
	x.cfg.RejectWindowS = 10
	s := &sessState{}
	s.reject(1, 0, true)
	s.reject(1, 0.5, true)
	if got := x.rejectsAt(s, 1, 10); got != 1 {
		t.Errorf("at 10 s: %d refusals count, want 1 (the one at 0 s is 10 s old)", got)
	}
	if got := x.rejectsAt(s, 1, 10.4); got != 1 {
		t.Errorf("at 10.4 s: %d refusals count, want 1", got)
	}
	if got := x.rejectsAt(s, 0, 10); got != 0 {
		t.Errorf("d0: %d refusals, want 0", got)
	}
}

// Residency on decoder 0 is a pin like any other; an index past the pool
// is ignored. ForgetSession also drops P's sticky pin of the session.
func TestResidentBounds(t *testing.T) {
	x := v3Dispatcher(V3Config{})
	x.Resident("s", 0, []uint64{1, 2}, 2000)
	if !x.Pinned("s") || x.sess(SessionKey{ID: "s"}).pin != 0 {
		t.Fatalf("resident on d0: pinned %t, want true on d0", x.Pinned("s"))
	}
	x.Resident("u", 2, []uint64{1}, 1000) // two decoders: index 2 is none
	if x.Pinned("u") || x.Sessions() != 1 {
		t.Fatalf("resident on d2 of two: pinned %t, %d sessions; want ignored", x.Pinned("u"), x.Sessions())
	}
	x.p.PinTo(0, "s", []uint64{1})
	x.ForgetSession("s")
	if _, ok := x.p.pins.Get(SessionKey{ID: "s"}); ok || x.Pinned("s") {
		t.Fatalf("after ForgetSession: P still pins s (%t) or D (%t)", ok, x.Pinned("s"))
	}
}
