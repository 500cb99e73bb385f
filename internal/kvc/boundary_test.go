package kvc

import (
	"slices"
	"testing"
)

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
	if r := x.session(SessionKey{ID: "s"}).resident; r != 1005 {
		t.Fatalf("after turn 1: resident %d, want 1005 (prompt and output)", r)
	}
	a, b := turn(2, 2000), turn(3, 3000)
	a.Finished(true)
	if r := x.session(SessionKey{ID: "s"}).resident; r != 0 {
		t.Fatalf("turn 2 ended with turn 3 in flight: resident %d, want 0, unknown (turn 3's prompt is not held yet)", r)
	}
	b.Finished(true)
	if r := x.session(SessionKey{ID: "s"}).resident; r != 3005 {
		t.Fatalf("after turn 3: resident %d, want 3005", r)
	}
}

// v3's local fallback: a request every decoder refused for space queues on
// the decoder with the least queued prefill (ties to the first), and with
// WholeOnP goes whole to an idle prefill worker whose queue is the shorter.
func TestV3LocalFallback(t *testing.T) {
	refusedEverywhere := func(x *Dispatcher, s string, blk uint64, input int) *Dispatch {
		t.Helper()
		d := x.Begin(0, Request{Session: s, Turn: 1, Blocks: []uint64{blk, blk + 1}, Input: input, Output: 10})
		for i := 0; d.Action().Kind == ActAdmit; i++ {
			if i > 4 {
				t.Fatalf("%s: admission loop", s)
			}
			d.Reply(AdmitReply{Reason: "no-space"})
		}
		d.Accepted()
		return d
	}
	x := v3Dispatcher(V3Config{DBudgetTokens: 10000, LocalFallback: true})
	a := refusedEverywhere(x, "a", 100, 8000)
	b := refusedEverywhere(x, "b", 200, 3000)
	for _, c := range []struct {
		d    *Dispatch
		on   int
		name string
	}{{a, 0, "a"}, {b, 1, "b"}} {
		if c.d.kind != ActDirect || c.d.Decoder() != c.on || c.d.Mode() != ModeLocalFall {
			t.Fatalf("%s: %v on d%d (%s), want a local fallback on d%d; path %v", c.name, c.d.kind, c.d.Decoder(), c.d.Mode(), c.on, c.d.Path())
		}
	}
	if p, dq := x.PrefillQueued(); !slices.Equal(p, []int{0}) || !slices.Equal(dq, []int{8000, 3000}) {
		t.Fatalf("queues P %v D %v, want [0] [8000 3000]", p, dq)
	}
	a.Finished(true)
	b.Finished(true)
	if p, dq := x.PrefillQueued(); !slices.Equal(p, []int{0}) || !slices.Equal(dq, []int{0, 0}) {
		t.Fatalf("all finished: queues P %v D %v, want zeros", p, dq)
	}

	w := v3Dispatcher(V3Config{DBudgetTokens: 10000, LocalFallback: true, WholeOnP: true})
	a = refusedEverywhere(w, "a", 100, 8000)
	b = refusedEverywhere(w, "b", 200, 3000)
	c := refusedEverywhere(w, "c", 300, 5000) // P 0+5,000 < d1 3,000+5,000
	if c.kind != ActWholeP || c.Mode() != ModeWholeOnP {
		t.Fatalf("c: %v (%s), want whole on the idle P; path %v", c.kind, c.Mode(), c.Path())
	}
	for _, d := range []*Dispatch{a, b, c} {
		d.Finished(true)
	}
}

// The router gate's own checks before the admission RPC, at their bounds:
// a session pinned on d0 whose append (the prompt less what d0 is believed
// to hold) is exactly τ_append is asked for a direct append only, one
// token more forces a seed; a new session is refused by the router's
// session cap once d0 holds cap sessions, not before.
func TestRouterGateBounds(t *testing.T) {
	world := func(cap int) *labelWorld {
		w := newLabelWorld(t, func(c *DispatchConfig) { c.Gate, c.TauAppend, c.SessionCap = GateRouter, 100, cap }, Options{Alpha: 1})
		w.x = NewDispatcher(w.x.cfg, []string{"p0"}, []string{"d0"}, Options{Alpha: 1}, Options{Alpha: 1})
		return w
	}
	w := world(0)
	w.run("s", 1, seedAll, true)
	held := w.x.sess(SessionKey{ID: "s"}).resident
	if w.x.sess(SessionKey{ID: "s"}).pin != 0 || held <= 0 {
		t.Fatalf("after turn 1: pin %d, %d tokens believed resident; want d0 and some", w.x.sess(SessionKey{ID: "s"}).pin, held)
	}
	for _, c := range []struct {
		append      int
		force, only bool
	}{{100, false, true}, {101, true, false}} {
		d := w.x.Begin(2, Request{Session: "s", Turn: 2, Blocks: []uint64{1, 2, 3}, Input: held + c.append, Output: 5})
		if a := d.Action(); a.Kind != ActAdmit || a.D != 0 || a.ForceSeed != c.force || a.DirectOnly != c.only {
			t.Errorf("append %d over τ_append 100: %+v, want admit d0 with ForceSeed %v DirectOnly %v", c.append, a, c.force, c.only)
		}
	}
	for _, c := range []struct {
		onD   int
		admit bool
	}{{0, true}, {1, false}} {
		w := world(1)
		w.x.onD[0] = c.onD
		d := w.x.Begin(0, Request{Session: "new", Turn: 1, Blocks: []uint64{9}, Input: 50, Output: 5})
		if got := d.Action().Kind == ActAdmit; got != c.admit {
			t.Errorf("session cap 1, d0 holding %d: admission asked %v, want %v (%+v, path %v)", c.onD, got, c.admit, d.Action(), d.Path())
		}
	}
}
