package kvc

import "testing"

// With a half-life, a request accepted on d0 counts among d0's recent ones.
func TestV3StartsRecentOnD0(t *testing.T) {
	x := v3Dispatcher(V3Config{DBudgetTokens: 10000, ColdRoute: true, BalanceStarts: true, BalanceHalfLifeS: 60})
	a := coldTurn(t, x, "a", 100, 2000)
	if a.Decoder() != 0 {
		t.Fatalf("a on d%d, want d0", a.Decoder())
	}
	if got := x.load.started.recentOn(0, 0, 60); got != 1 {
		t.Errorf("d0's recent requests %v, want 1", got)
	}
}

// The reseed is costed with what P caches of the prompt: with attention at
// 1.6e-8 s per token pair and a 5 GB/s host link, the 1,000-token append
// after 100,000 cached costs c = 0.01 + 1.6e-5·1,000·100,500 = 1.618 s; the
// load-back max(c + 2/50, 2 + c/50) = 2.032 s; the reseed c + 0.404 =
// 2.022 s, the cheaper (counted after 102,000 cached it would be 2.054 s).
func TestTierPlaceCountsPCached(t *testing.T) {
	x := tierWorld(5e9, 0)
	x.cfg.V3.Isolation.Cost.AttnS = 1.6e-8
	d := hostTurn2(t, x)
	d.Reply(AdmitReply{CanAdmit: true, Direct: true, Tier: TierHost, CachedTokens: 100_000, HostTokens: 100_000})
	if d.Mode() != ModeHostReseed {
		t.Errorf("%s, want %s; path %v", d.Mode(), ModeHostReseed, d.Path())
	}
}

// Tier costing at its two ties, in binary-exact figures: one P, one
// decoder, 512-token blocks, prefill 2⁻¹⁰ s a token (no overhead, no
// attention), KV 1 byte a token over 1 layer, the host link 1,024 B/s, the
// P→D link 2,048 B/s. Turn 2 (1,024 tokens) is answered direct from host,
// 512 cached there: the load-back step is 0.5 − 0.5 + max(0.5 + 0.5,
// 0.5 + 0.5) = 1 s. The reseed through P, which caches turn 1's 512
// tokens, is 0.5 s of prefill + 1,024/2,048 = 0.5 s of transfer = 1 s:
// a tie keeps the load-back. With a TPOT SLO of 0.5 s over 3-token decodes
// d0's bucket holds 0.5·2 = 1 s: a stall of exactly 1 s fits.
func TestTierPlaceTies(t *testing.T) {
	for _, slo := range []float64{0, 0.5} {
		v3 := V3Config{TypedRejects: true,
			Isolation: DecodeIsolation{TPOTSLOS: slo, OutputTokens: 3, Cost: StallCost{PerTokenS: 1.0 / 1024}},
			Tiers:     TierCost{KVBytesPerToken: 1, Layers: 1, HostBandwidth: 1024, XferBandwidth: 2048}}
		if slo > 0 {
			v3.Tiers.XferBandwidth = 1 // the reseed far dearer: only the budget decides
		}
		x := NewDispatcher(DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1},
			TauReject: 3, TauAppend: 8192, MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack,
			BlockSize: 512, V3: v3}, []string{"p0"}, []string{"d0"}, Options{Alpha: 1}, Options{Alpha: 1})
		a := x.Begin(0, Request{Session: "s", Turn: 1, Blocks: []uint64{1}, Input: 512, Output: 3})
		a.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
		a.Accepted()
		a.PrefillDone()
		a.Finished(true)
		b := x.Begin(100, Request{Session: "s", Turn: 2, Blocks: []uint64{1, 2}, Input: 1024, Output: 3})
		b.Reply(AdmitReply{CanAdmit: true, Direct: true, Tier: TierHost, CachedTokens: 512, HostTokens: 512})
		if b.Action().Kind != ActDirect {
			t.Errorf("SLO %v: %v (%s), want the load-back (direct); path %v", slo, b.Action().Kind, b.Mode(), b.Path())
		}
	}
}
