package kvc

import (
	"strings"
	"testing"
)

// A worker out of service is passed over while another will do, for every
// mechanism and both pools, and taken again once back; with every worker
// down the router still answers.
func TestDownWorkersArePassedOver(t *testing.T) {
	for _, mech := range []Mechanism{MechKVC, MechPD, MechColo} {
		prefill := []string{"p0", "p1"}
		if mech == MechColo {
			prefill = nil
		}
		x := NewDispatcher(DispatchConfig{Mechanism: mech, Policy: PolicyKVAware, Options: Options{Alpha: 1}, TauReject: 3,
			TauAppend: 8192, MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack},
			prefill, []string{"d0", "d1", "d2"}, Options{Alpha: 1}, Options{Alpha: 1})
		first := func() Action {
			d := x.Begin(0, Request{Session: "s", Turn: 1, Blocks: []uint64{7, 8}, Input: 150, Output: 5})
			if a := d.Action(); a.Kind == ActAdmit {
				d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"}) // a seed: P chosen too
			}
			return d.Action()
		}
		if a := first(); a.D != 0 || (mech != MechColo && a.P != 0) {
			t.Fatalf("%s: all up, first choice %+v, want d0 (and p0)", mech, a)
		}
		x.SetDown(RoleDecode, 0, true)
		x.SetDown(RolePrefill, 0, true)
		if !x.Down(RoleDecode, 0) || x.Down(RoleDecode, 1) {
			t.Fatalf("%s: Down does not report SetDown", mech)
		}
		if a := first(); a.D == 0 || (mech != MechColo && a.P != 1) {
			t.Fatalf("%s: d0 and p0 down, chose %+v", mech, a)
		}
		x.SetDown(RoleDecode, 1, true)
		x.SetDown(RoleDecode, 2, true)
		if a := first(); a.Kind == ActFail || a.D < 0 {
			t.Fatalf("%s: every decoder down, got %+v, want the health checks ignored", mech, a)
		}
		// Drained workers stay out even then; all drained fails.
		for w := range 3 {
			x.DRouter().SetExcluded(w, true)
		}
		if a := first(); a.Kind != ActFail || !strings.Contains(a.Cause, "drained") {
			t.Fatalf("%s: every decoder drained and down, got %+v, want a failure", mech, a)
		}
		for w := range 3 {
			x.DRouter().SetExcluded(w, false)
		}
		// A drained worker that recovers stays drained.
		x.DRouter().SetExcluded(1, true)
		x.SetDown(RoleDecode, 1, false)
		if !x.DRouter().Out(1) {
			t.Fatalf("%s: a drained worker back from down is choosable", mech)
		}
		x.DRouter().SetExcluded(1, false)
		x.SetDown(RoleDecode, 1, true)
		x.SetDown(RoleDecode, 0, false)
		x.SetDown(RoleDecode, 0, false) // idempotent
		if a := first(); a.D != 0 {
			t.Fatalf("%s: d0 back, d1 and d2 down, chose %+v", mech, a)
		}
	}
}
