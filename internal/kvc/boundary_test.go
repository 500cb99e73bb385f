package kvc

import "testing"

// The boundaries the mutation round found unheld (docs/mutation.md): each
// test fails on the named mutant.

// v3's local-prefill budget is inclusive: a cold turn whose prefill brings
// the decoder's queue to exactly DBudgetTokens is placed on the decoder,
// one token more goes through P (mutant: <= → <).
func TestV3BudgetBoundary(t *testing.T) {
	for _, tc := range []struct {
		budget int
		kind   ActionKind
	}{{8000, ActDirect}, {7999, ActSeed}} {
		x := v3Dispatcher(V3Config{DBudgetTokens: tc.budget})
		d := coldTurn(t, x, "a", 1, 8000)
		if d.kind != tc.kind {
			t.Fatalf("8,000 tokens with a budget of %d: %v (%s), want %v; path %v", tc.budget, d.kind, d.Mode(), tc.kind, d.Path())
		}
		d.Finished(true)
	}
}

// Under the router gate the belief of what a decoder holds for a session
// (the append estimate's base) is unknown (0) from an acceptance until the
// session's last request in flight ends: one ending while a later one still
// runs must not take the later one's prompt as held (mutant: the in-flight
// condition dropped).
func TestRouterGateResidentWaitsForLastInflight(t *testing.T) {
	x := NewDispatcher(DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1},
		TauReject: 3, TauAppend: 8192, MaxRetries: -1, SeedMinTurn: 1, Gate: GateRouter, Reset: ResetDirect, Belief: BeliefTrack},
		[]string{"p0"}, []string{"d0"}, Options{Alpha: 1}, Options{Alpha: 1})
	turn := func(n, input int) *Dispatch {
		t.Helper()
		d := x.Begin(0, Request{Session: "s", Turn: n, Blocks: []uint64{1, 2, uint64(10 + n)}, Input: input, Output: 5})
		if d.Action().Kind != ActAdmit {
			t.Fatalf("turn %d: %v, want an admission", n, d.Action().Kind)
		}
		d.Reply(AdmitReply{CanAdmit: true, Direct: n > 1, Reason: "session-not-resident"})
		d.Accepted()
		return d
	}
	turn(1, 1000).Finished(true)
	if r := x.session("s").resident; r != 1005 {
		t.Fatalf("after turn 1: resident %d, want 1005 (prompt and output)", r)
	}
	a, b := turn(2, 2000), turn(3, 3000)
	a.Finished(true)
	if r := x.session("s").resident; r != 0 {
		t.Fatalf("turn 2 ended with turn 3 in flight: resident %d, want 0, unknown (turn 3's prompt is not held yet)", r)
	}
	b.Finished(true)
	if r := x.session("s").resident; r != 3005 {
		t.Fatalf("after turn 3: resident %d, want 3005", r)
	}
}
