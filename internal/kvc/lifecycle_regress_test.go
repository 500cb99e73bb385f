package kvc

import "testing"

// Bug 6 (issue 20): ForgetSession left load.hosted counting a session
// hosted whole on a prefill worker, so P looked busier for good.
func TestForgetSessionHostedOnP(t *testing.T) {
	x := v3Dispatcher(V3Config{DBudgetTokens: 10000, ColdRoute: true, LocalFallback: true, WholeOnP: true})
	blocks := turnOneThroughP(x, 10)
	b := x.Begin(0, Request{Session: "a", Turn: 2, Blocks: append(blocks, 900), Input: 20500, Output: 10})
	for i := 0; i < 3 && b.Action().Kind == ActAdmit; i++ {
		b.Reply(AdmitReply{Reason: "real-large-append"})
	}
	if b.Mode() != ModeWholeOnP {
		t.Fatalf("turn 2 %s, want %s", b.Mode(), ModeWholeOnP)
	}
	b.Accepted()
	b.Finished(true)
	if x.load.hosted[0] != 1 {
		t.Fatalf("p0 hosts %d sessions, want 1", x.load.hosted[0])
	}
	x.ForgetSession("a")
	if x.load.hosted[0] != 0 {
		t.Fatalf("p0 still hosts %d sessions after the only one was forgotten", x.load.hosted[0])
	}
}

// turnOneThroughP plays session a's first turn (20 blocks, 20,000 tokens,
// output tokens out) through P to its end: refused by the decoder as not
// resident, prefilled on P, finished. It returns the turn's blocks.
func turnOneThroughP(x *Dispatcher, out int) []uint64 {
	var blocks []uint64
	for i := range 20 {
		blocks = append(blocks, uint64(100+i))
	}
	a := x.Begin(0, Request{Session: "a", Turn: 1, Blocks: blocks, Input: 20000, Output: out})
	a.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
	a.Accepted()
	a.PrefillDone()
	a.Finished(true)
	return blocks
}
