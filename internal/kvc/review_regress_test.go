package kvc

import "testing"

// A direct append moves no KV over the transport, yet Accepted marks it as
// the half-open breaker's probe; nothing ever reports its outcome, so the
// breaker stays open (probing) for good and the decoder never gets a seed
// or plain-PD request again.
func TestRegressionDirectAppendWedgesHalfOpenBreaker(t *testing.T) {
	x := NewDispatcher(DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1},
		TauReject: 3, TauAppend: 8192, MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack,
		Breaker: BreakerConfig{Failures: 1, WindowS: 10, CooldownS: 1}},
		[]string{"p0"}, []string{"d0", "d1"}, Options{Alpha: 1}, Options{Alpha: 1})
	// Turn 1 seeds on d0.
	d := x.Begin(0, Request{Session: "s", Turn: 1, Blocks: []uint64{1, 2}, Input: 128, Output: 4})
	if a := d.Action(); a.Kind != ActAdmit || a.D != 0 {
		t.Fatalf("turn 1 %+v", a)
	}
	d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
	d.Accepted()
	d.Finished(true)
	x.PeerFailed(0.5, 0) // some other transfer to d0 timed out: breaker open
	// After the cooldown, turn 2 goes direct on d0.
	d = x.Begin(2, Request{Session: "s", Turn: 2, Blocks: []uint64{1, 2, 3}, Input: 192, Output: 4})
	if a := d.Action(); a.Kind != ActAdmit || a.D != 0 {
		t.Fatalf("turn 2 %+v", a)
	}
	d.Reply(AdmitReply{CanAdmit: true, Direct: true})
	d.Accepted()
	d.Finished(true)
	if x.BreakerOpen(100, 0) {
		t.Errorf("d0's breaker still holds traffic back 98 s after its cooldown ended, with no transfer outstanding")
	}
}
