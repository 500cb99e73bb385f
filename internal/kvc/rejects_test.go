package kvc

import "testing"

// With a reject window only the refusals of its last seconds count toward
// τ_reject: two refusals by d0 at 0 s and 10 s blacklist it for the session
// at 20 s (τ_reject 2); at 65 s the first has aged out and d0 is asked
// again, first in Algorithm 1's order. Without a window (and with resets
// off) the blacklist holds for good.
func TestRejectWindow(t *testing.T) {
	for _, tc := range []struct {
		window float64
		at65   bool // blacklisted at 65 s
		left   int  // refusals counted at 100 s
	}{{60, false, 0}, {0, true, 2}} {
		x := NewDispatcher(DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1},
			TauReject: 2, TauAppend: 8192, MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetOff, Belief: BeliefTrack,
			RejectWindowS: tc.window},
			[]string{"p0"}, []string{"d0", "d1", "d2"}, Options{Alpha: 1}, Options{Alpha: 1})
		first := func(now float64) int {
			d := x.Begin(now, Request{Session: "s", Turn: 2, Blocks: []uint64{1, 2}, Input: 150, Output: 5})
			return d.Action().D
		}
		for _, now := range []float64{0, 10} {
			d := x.Begin(now, Request{Session: "s", Turn: 1, Blocks: []uint64{1, 2}, Input: 150, Output: 5})
			if a := d.Action(); a.Kind != ActAdmit || a.D != 0 {
				t.Fatalf("window %v, %v s: first admission %+v, want d0", tc.window, now, a)
			}
			d.Reply(AdmitReply{Reason: "session-cap"})
		}
		if got := first(20); got == 0 {
			t.Errorf("window %v: at 20 s, after two refusals, d0 asked first", tc.window)
		}
		if got := first(65) != 0; got != tc.at65 {
			t.Errorf("window %v: at 65 s d0 blacklisted %v, want %v", tc.window, got, tc.at65)
		}
		first(100)
		if got := x.Rejects("s", 0); got != tc.left {
			t.Errorf("window %v: %d refusals counted at 100 s, want %d", tc.window, got, tc.left)
		}
	}
}
