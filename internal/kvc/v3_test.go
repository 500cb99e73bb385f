package kvc

import (
	"slices"
	"testing"
)

func v3Dispatcher(v3 V3Config) *Dispatcher {
	return NewDispatcher(DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1},
		TauReject: 3, TauAppend: 8192, MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack,
		BlockSize: 1000, V3: v3},
		[]string{"p0"}, []string{"d0", "d1"}, Options{Alpha: 1}, Options{Alpha: 1})
}

// coldTurn begins a first turn of session s with input tokens (distinct
// blocks per session), answers its admission with a seed, and accepts what
// the dispatcher decides.
func coldTurn(t *testing.T, x *Dispatcher, s string, blk uint64, input int) *Dispatch {
	t.Helper()
	d := x.Begin(0, Request{Session: s, Turn: 1, Blocks: []uint64{blk, blk + 1}, Input: input, Output: 10})
	if d.Action().Kind != ActAdmit {
		t.Fatalf("%s: first action %v, want an admission", s, d.Action().Kind)
	}
	d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
	d.Accepted()
	return d
}

// TestV3PlacementByHand: one P, two decoders, budget 10,000 tokens, margin
// 0, cold routing. Queues in tokens, computed by hand:
//
//	a 8,000: d0 0+8,000 ≤ P 8,000 → local on d0          (d0 8,000)
//	b 6,000: cold route d1 (6,000 < 14,000); local        (d1 6,000)
//	c 9,000: cold route d1 (15,000 < 17,000); 15,000 > budget → through P (P 9,000)
//	e 3,000: cold route d1 (9,000 < 11,000); 9,000 ≤ P 12,000 → local (d1 9,000)
//	a's prefill ends: d0 back to 0.
func TestV3PlacementByHand(t *testing.T) {
	x := v3Dispatcher(V3Config{DBudgetTokens: 10000, ColdRoute: true})
	type step struct {
		s      string
		input  int
		kind   ActionKind
		d      int
		mode   string
		pq, dq []int
	}
	var ds []*Dispatch
	for i, st := range []step{
		{"a", 8000, ActDirect, 0, ModeLocalSeed, []int{0}, []int{8000, 0}},
		{"b", 6000, ActDirect, 1, ModeLocalSeed, []int{0}, []int{8000, 6000}},
		{"c", 9000, ActSeed, 1, "pd-router-turn1-seed", []int{9000}, []int{8000, 6000}},
		{"e", 3000, ActDirect, 1, ModeLocalSeed, []int{9000}, []int{8000, 9000}},
	} {
		d := coldTurn(t, x, st.s, uint64(100*(i+1)), st.input)
		if d.kind != st.kind || d.Decoder() != st.d || d.Mode() != st.mode {
			t.Fatalf("%s: %v on d%d (%s), want %v on d%d (%s); path %v", st.s, d.kind, d.Decoder(), d.Mode(), st.kind, st.d, st.mode, d.Path())
		}
		if p, dq := x.PrefillQueued(); !slices.Equal(p, st.pq) || !slices.Equal(dq, st.dq) {
			t.Fatalf("after %s: queues P %v D %v, want %v %v", st.s, p, dq, st.pq, st.dq)
		}
		ds = append(ds, d)
	}
	ds[0].PrefillDone()
	if _, dq := x.PrefillQueued(); !slices.Equal(dq, []int{0, 9000}) {
		t.Fatalf("after a's prefill: D queues %v, want [0 9000]", dq)
	}
	for _, d := range ds {
		d.Finished(true)
	}
	if p, dq := x.PrefillQueued(); !slices.Equal(p, []int{0}) || !slices.Equal(dq, []int{0, 0}) {
		t.Fatalf("all finished: queues P %v D %v, want zeros", p, dq)
	}
}

// TestV3LargeAppend: an append over τ_append on the decoder that holds the
// session stays there within the budget (P5) and goes through P beyond it.
func TestV3LargeAppend(t *testing.T) {
	for _, tc := range []struct {
		budget int
		want   string
	}{{20000, ModeLargeDirect}, {5000, "pd-router-real-large-append-reseed"}, {0, "pd-router-real-large-append-reseed"}} {
		x := v3Dispatcher(V3Config{DBudgetTokens: tc.budget})
		first := coldTurn(t, x, "s", 1, 4000)
		first.Finished(true)
		d := x.Begin(0, Request{Session: "s", Turn: 2, Blocks: []uint64{1, 2, 3}, Input: 14000, Output: 10})
		home := d.Action().D
		// The home decoder refuses: the append of 10,000 tokens is over
		// τ_append 8,192; the other one answers a seed.
		d.Reply(AdmitReply{Reason: "real-large-append", CachedTokens: 4000})
		if d.Action().Kind == ActAdmit {
			d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
		}
		if d.Mode() != tc.want {
			t.Fatalf("budget %d: %s, want %s (path %v)", tc.budget, d.Mode(), tc.want, d.Path())
		}
		if tc.want == ModeLargeDirect && (d.Action().Kind != ActDirect || d.Decoder() != home) {
			t.Fatalf("budget %d: %v on d%d, want a direct append on its home d%d", tc.budget, d.Action().Kind, d.Decoder(), home)
		}
	}
}

// TestV3InlineAdmission: the first admission rides on the request; a seed
// answer then owes the round trip, a direct one does not.
func TestV3InlineAdmission(t *testing.T) {
	x := v3Dispatcher(V3Config{Inline: true, RTTS: 0.006})
	d := x.Begin(0, Request{Session: "s", Turn: 1, Blocks: []uint64{1}, Input: 500, Output: 10})
	if a := d.Action(); a.Kind != ActAdmit || !a.Inline {
		t.Fatalf("first action %+v, want an inline admission", a)
	}
	d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
	if a := d.Action(); a.Kind != ActSeed || a.Delay != 0.006 {
		t.Fatalf("after a seed answer %+v, want a seed after the 6 ms round trip", a)
	}
	d.Accepted()
	d.Finished(true)
	d = x.Begin(1, Request{Session: "s", Turn: 2, Blocks: []uint64{1, 2}, Input: 600, Output: 10})
	d.Reply(AdmitReply{CanAdmit: true, Direct: true, CachedTokens: 500})
	if a := d.Action(); a.Kind != ActDirect || a.Delay != 0 {
		t.Fatalf("after a direct answer %+v, want a direct append at once", a)
	}
	// v2 (the zero V3Config) asks with a round trip and never places locally.
	x = v3Dispatcher(V3Config{})
	d = x.Begin(0, Request{Session: "s", Turn: 1, Blocks: []uint64{1}, Input: 500, Output: 10})
	if d.Action().Inline {
		t.Fatal("v2 admission marked inline")
	}
	d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
	if d.Action().Kind != ActSeed || d.Action().Delay != 0 {
		t.Fatalf("v2 seed answer gave %+v", d.Action())
	}
}

// TestV3PHostsByHand: one P, two decoders, P hosting sessions. A new
// session starts whole on P while P serves fewer requests whole than every
// decoder has in flight, or while P has no prefill queued and hosts fewer
// sessions than every decoder:
//
//	a: decoders 0 and 0 in flight, P serves 0 whole, hosts 0, decoders host 0, 0 → a decoder (d0)
//	b: in flight 1 and 0 → a decoder (d1)
//	c: in flight 1 and 1, P 0 whole → whole on P
//	e: P 1 whole, not fewer than 1; P's queue holds c's prefill → a decoder
func TestV3PHostsByHand(t *testing.T) {
	x := v3Dispatcher(V3Config{DBudgetTokens: 10000, ColdRoute: true, LocalFallback: true, WholeOnP: true, PHosts: true})
	a := coldTurn(t, x, "a", 100, 8000)
	b := coldTurn(t, x, "b", 200, 6000)
	if a.Decoder() != 0 || b.Decoder() != 1 {
		t.Fatalf("a on d%d, b on d%d; want d0 and d1 (paths %v %v)", a.Decoder(), b.Decoder(), a.Path(), b.Path())
	}
	c := x.Begin(0, Request{Session: "c", Turn: 1, Blocks: []uint64{300, 301}, Input: 5000, Output: 10})
	if act := c.Action(); act.Kind != ActWholeP || act.P != 0 || c.Mode() != ModeWholeOnP {
		t.Fatalf("c: %+v (%s), want whole on p0; path %v", act, c.Mode(), c.Path())
	}
	c.Accepted()
	e := coldTurn(t, x, "e", 400, 3000)
	if e.Decoder() < 0 {
		t.Fatalf("e: %s, want a decoder; path %v", e.Mode(), e.Path())
	}
	for _, d := range []*Dispatch{a, b, c, e} {
		d.Finished(true)
	}
	if !x.V3Idle() {
		t.Fatalf("all finished but v3's bookkeeping is not empty: %+v", x.load)
	}
	// Nothing in flight now; P hosts c, the decoders a, b and e. Once each
	// decoder hosts more sessions than P, an idle P takes the next one.
	var got []string
	for i, s := range []string{"f", "g", "h"} {
		d := x.Begin(0, Request{Session: s, Turn: 1, Blocks: []uint64{uint64(500 + 100*i)}, Input: 1000, Output: 10})
		if d.Action().Kind == ActWholeP {
			got = append(got, s+":P")
			d.Accepted()
		} else {
			d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
			d.Accepted()
			got = append(got, s+":D")
		}
		d.Finished(true)
	}
	// f: P hosts 1, the decoders 2 and 1: not fewer than every one → D (d1,
	// the lighter); g: the decoders 2 and 2 → P; h: P hosts 2 → D.
	if want := []string{"f:D", "g:P", "h:D"}; !slices.Equal(got, want) {
		t.Fatalf("placements %v, want %v", got, want)
	}
}

// TestV3ColdInflightTokens: a new session whose prompt shares a prefix with
// a session in flight on d0 follows its prefix there on prefill cost alone,
// and goes to the idle d1 once each request in flight costs 4,096 tokens.
func TestV3ColdInflightTokens(t *testing.T) {
	for _, tc := range []struct {
		weight, want int
	}{{0, 0}, {4096, 1}} {
		x := v3Dispatcher(V3Config{DBudgetTokens: 100000, ColdRoute: true, ColdInflightTokens: tc.weight})
		a := coldTurn(t, x, "a", 100, 2000) // blocks 100, 101
		a.PrefillDone()
		// b shares a's two blocks: on d0 it computes 500 tokens, on d1 2,500.
		b := x.Begin(0, Request{Session: "b", Turn: 1, Blocks: []uint64{100, 101, 900}, Input: 2500, Output: 10})
		if got := b.Action().D; got != tc.want {
			t.Fatalf("weight %d: b asked d%d, want d%d; path %v", tc.weight, got, tc.want, b.Path())
		}
	}
}

// TestV3PHostsSpreadsOverPrefillWorkers: with two prefill workers, a new
// session P would host goes to the one serving fewer requests whole, even
// when P's router prefers the other for the prefix it caches.
func TestV3PHostsSpreadsOverPrefillWorkers(t *testing.T) {
	x := NewDispatcher(DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1},
		TauReject: 3, TauAppend: 8192, MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack,
		BlockSize: 1000, V3: V3Config{DBudgetTokens: 10000, ColdRoute: true, LocalFallback: true, WholeOnP: true, PHosts: true}},
		[]string{"p0", "p1"}, []string{"d0"}, Options{Alpha: 1}, Options{Alpha: 1})
	a := coldTurn(t, x, "a", 100, 4000)
	b := x.Begin(0, Request{Session: "b", Turn: 1, Blocks: []uint64{200, 201}, Input: 2000, Output: 10})
	bp := b.Action().P
	if act := b.Action(); act.Kind != ActWholeP {
		t.Fatalf("b: %+v, want whole on a prefill worker; path %v", act, b.Path())
	}
	b.Accepted()
	c := x.Begin(0, Request{Session: "c", Turn: 1, Blocks: []uint64{200, 201, 202}, Input: 3000, Output: 10})
	if act := c.Action(); act.Kind != ActWholeP || act.P == bp {
		t.Fatalf("c: %+v, want whole on the other prefill worker than b's p%d; path %v", act, bp, c.Path())
	}
	c.Accepted()
	for _, d := range []*Dispatch{a, b, c} {
		d.Finished(true)
	}
	if !x.V3Idle() {
		t.Fatal("v3's bookkeeping is not empty at the end")
	}
}

// TestV3CountsTheTransfer: through P a first turn's KV also crosses to the
// decoder. One P, one decoder holding 5,000 queued tokens, a cold prompt of
// 10,000: on the queues alone D's 15,000 is over P's 10,000 and the seed
// goes through P; counting the transfer at half a prefill token per token,
// P's path is 15,000 too and D takes it.
func TestV3CountsTheTransfer(t *testing.T) {
	for _, tc := range []struct {
		xfer float64
		want ActionKind
	}{{0, ActSeed}, {0.5, ActDirect}} {
		x := NewDispatcher(DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1},
			TauReject: 3, TauAppend: 8192, MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack,
			BlockSize: 1000, V3: V3Config{DBudgetTokens: 100000, TransferTokens: tc.xfer}},
			[]string{"p0"}, []string{"d0"}, Options{Alpha: 1}, Options{Alpha: 1})
		if a := coldTurn(t, x, "a", 100, 5000); a.kind != ActDirect {
			t.Fatalf("xfer %v: a %v, want local on d0 (5,000 ≤ 5,000); path %v", tc.xfer, a.kind, a.Path())
		}
		if b := coldTurn(t, x, "b", 200, 10000); b.kind != tc.want {
			t.Fatalf("xfer %v: b %v, want %v; path %v", tc.xfer, b.kind, tc.want, b.Path())
		}
	}
}
