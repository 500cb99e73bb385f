package kvc

import (
	"math"
	"strings"
	"testing"
)

// tierWorld is one P and one decoder with tier costing: prefill 10 µs a
// token (no overhead, no attention), KV 100,000 bytes a token over 50
// layers, the host link at host bytes/s (2 µs a token at 50 GB/s) and the
// P→D link at 25 GB/s (4 µs a token); TPOT SLO slo (0 = v4 off) over 2 ms
// steps for 101-token decodes.
func tierWorld(host, slo float64) *Dispatcher {
	v3 := V3Config{TypedRejects: true,
		Isolation: DecodeIsolation{TPOTSLOS: slo, OutputTokens: 101, Cost: StallCost{PerTokenS: 1e-5, ChunkTokens: 8192, DecodeStepS: 0.002}},
		Tiers:     TierCost{KVBytesPerToken: 100_000, Layers: 50, HostBandwidth: host, XferBandwidth: 25e9}}
	return NewDispatcher(DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1},
		TauReject: 3, TauAppend: 8192, MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack,
		BlockSize: 1000, V3: v3}, []string{"p0"}, []string{"d0"}, Options{Alpha: 1}, Options{Alpha: 1})
}

// onHost seeds session s (100,000 tokens) on d0, ends the turn and has d0
// demote it to its host tier; then its next turn (101,000 tokens: a
// 1,000-token append) is answered direct from host, all 100,000 cached
// tokens loaded back.
func onHost(t *testing.T, x *Dispatcher, s string) *Dispatch {
	t.Helper()
	return secondTurnOnD0(t, x, s, func() {
		x.SessionDemoted(0, s)
		if tier, hbm, host, _ := x.TierTokens(s); tier != TierHost || hbm != 0 || host != 100_101 {
			t.Fatalf("after the demotion: tier %q, %d HBM and %d host tokens; want host, 0 and 100,101 (prompt and output)", tier, hbm, host)
		}
	}, AdmitReply{CanAdmit: true, Direct: true, Tier: TierHost, CachedTokens: 100_000, HostTokens: 100_000})
}

// secondTurnOnD0 seeds session s (100,000 tokens) on d0 and ends the
// turn, runs between (nil: nothing), then begins its next turn (101,000
// tokens: a 1,000-token append), which d0 is asked first, and gives it
// reply.
func secondTurnOnD0(t *testing.T, x *Dispatcher, s string, between func(), reply AdmitReply) *Dispatch {
	t.Helper()
	blocks := make([]uint64, 101)
	for i := range blocks {
		blocks[i] = uint64(s[0])<<32 | uint64(i+1)
	}
	d := x.Begin(0, Request{Session: s, Turn: 1, Blocks: blocks[:100], Input: 100_000, Output: 101})
	d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
	d.Accepted()
	d.Finished(true)
	if between != nil {
		between()
	}
	d = x.Begin(100, Request{Session: s, Turn: 2, Blocks: blocks, Input: 101_000, Output: 101})
	if d.Action().Kind != ActAdmit || d.Action().D != 0 {
		t.Fatalf("turn 2 not asked of d0 first: %+v", d.Action())
	}
	d.Reply(reply)
	return d
}

// TestTierCostByHand: the load-back of 100,000 host tokens is 0.2 s on the
// link (10 GB at 50 GB/s); it rides on the append's one chunk of 1,000
// tokens (0.01 s of compute), so the step takes max(0.01 + 0.2/50,
// 0.2 + 0.01/50) = 0.2002 s. The reseed goes through an idle P that, as
// the router believes, still caches turn 1's 100,000-token prompt: it
// computes the 1,000-token append (0.01 s) and moves the whole prompt's KV
// (101,000 · 100,000 B at 25 GB/s = 0.404 s): 0.414 s. The transfer of a
// huge session loses to its load-back by the links' numbers, so the
// session is loaded back, and v4 draws the load-back's 0.2002 s from d0's
// bucket, not the append's 0.01 s. Over a host link of 5 GB/s the load is
// 2 s, the step 2.0002 s, and the reseed is the cheaper: it goes through P.
func TestTierCostByHand(t *testing.T) {
	tc := TierCost{KVBytesPerToken: 100_000, Layers: 50, HostBandwidth: 50e9, XferBandwidth: 25e9}
	sc := StallCost{PerTokenS: 1e-5, ChunkTokens: 8192}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"LoadS(100000)", tc.LoadS(100_000), 0.2},
		{"TransferS(101000)", tc.TransferS(101_000), 0.404},
		{"PrefillWithLoadS(1000, 100000, 100000)", tc.PrefillWithLoadS(sc, 1000, 100_000, 100_000), 0.2002},
		{"PrefillWithLoadS(1000, 100000, 0)", tc.PrefillWithLoadS(sc, 1000, 100_000, 0), 0.01},
		// 20,000 new tokens: chunks of 8,192, 8,192, 3,616; the load hides
		// the first's 0.08192 s: 0.2 + 0.08192/50 + 0.11808 = 0.3197184.
		{"PrefillWithLoadS(20000, 100000, 100000)", tc.PrefillWithLoadS(sc, 20_000, 100_000, 100_000), 0.2 + 0.08192/50 + 0.11808},
	} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}

	t.Run("loaded back", func(t *testing.T) {
		x := tierWorld(50e9, 0.012)
		d := onHost(t, x, "s")
		if d.Action().Kind != ActDirect || d.Mode() != "kvcache-direct-to-d-session" {
			t.Fatalf("got %v %q, want a direct append (load-back 0.2002 s < reseed 0.414 s); path %v", d.Action().Kind, d.Mode(), d.Path())
		}
		if p := strings.Join(d.Path(), "; "); !strings.Contains(p, "load-back 0.200 s, reseed through p0 0.414 s: load back") {
			t.Fatalf("path %q does not carry the two costs", p)
		}
		before, _ := x.V4Stall()
		d.Accepted()
		if drawn, _ := x.V4Stall(); math.Abs(drawn-before-0.2002) > 1e-9 {
			t.Fatalf("v4 drew %v s for the load-back, want 0.2002", drawn-before)
		}
		if tier, hbm, host, _ := x.TierTokens("s"); tier != TierHBM || host != 0 {
			t.Fatalf("after the load-back: %q %d/%d, want hbm with nothing on host", tier, hbm, host)
		}
	})
	t.Run("slow host link: reseeded", func(t *testing.T) {
		x := tierWorld(5e9, 0)
		d := onHost(t, x, "s")
		if d.Action().Kind != ActSeed || d.Mode() != ModeHostReseed || d.Action().D != 0 {
			t.Fatalf("got %v %q to d%d, want a reseed through P to d0 (reseed 0.414 s < load-back 2.0002 s); path %v",
				d.Action().Kind, d.Mode(), d.Action().D, d.Path())
		}
	})
	t.Run("tiers off: host counts as cached", func(t *testing.T) {
		x := tierWorld(5e9, 0)
		x.cfg.V3.Tiers = TierCost{}
		if d := onHost(t, x, "s"); d.Action().Kind != ActDirect {
			t.Fatalf("without tier costing got %v %q, want direct", d.Action().Kind, d.Mode())
		}
	})
}

// TestTierCostOverBudget: v4 at 12 ms over 2 ms steps gives d0 a bucket of
// 0.01·100 = 1 s, refilled at 5/6 s a second. Set by hand to 0.1 s at
// t=100 (the session pinned there makes d0 a decoder with a victim), it is
// under the load-back's 0.2002 s stall: the 0.414 s reseed through P runs
// instead, though it is the slower (isolation first), and the bucket keeps
// its 0.1 s.
func TestTierCostOverBudget(t *testing.T) {
	x := tierWorld(50e9, 0.012)
	x.v4Grow()
	x.v4.d[0] = stallBucket{level: 0.1, at: 100, used: true}
	d := onHost(t, x, "s")
	if d.Action().Kind != ActSeed || d.Mode() != ModeHostReseed {
		t.Fatalf("got %v %q, want a reseed through P (load-back's 0.2002 s stall over d0's 0.1 s); path %v", d.Action().Kind, d.Mode(), d.Path())
	}
	if p := strings.Join(d.Path(), "; "); !strings.Contains(p, "(over its stall budget)") {
		t.Fatalf("path %q does not name the budget", p)
	}
	d.Accepted()
	if lv := x.v4Level(x.v4Bucket(false, 0), 100); math.Abs(lv-0.1) > 1e-9 {
		t.Fatalf("d0's bucket %v after the reseed, want 0.1 untouched", lv)
	}
}

// TestSeedAnswerHostTokens: session s (100,000 tokens, seeded through P, so
// the router believes P caches them) is demoted to d0's host tier; its
// next turn of 130,000 tokens is an append of 30,000, over τ_append, so d0
// answers a seed that names the 100,000 tokens its host tier holds (cached
// 100,000, all on host). The belief takes them (tier host, 100,000). v3's
// queues compare d0's 30,000 tokens to compute with P's 30,000 (what P
// lacks): local (margin 0), where counting the host tokens as uncached
// (130,000 against 30,000) would send it through P. v4 costs the local
// reseed with its load-back: 30,000 tokens in chunks of 8,192 are 0.3 s
// of compute, the first chunk's 0.08192 s riding under the 0.2 s load
// (max(0.08192 + 0.2/50, 0.2 + 0.08192/50) = 0.2016384), so the stall is
// 0.3 − 0.08192 + 0.2016384 = 0.4197184 s: it fits d0's full 1 s bucket
// and is drawn whole; in a bucket of 0.35 s, which the compute alone
// (0.3 s) would fit, it does not, and the reseed goes through P.
func TestSeedAnswerHostTokens(t *testing.T) {
	for _, c := range []struct {
		name   string
		bucket float64 // d0's level at t=100 (0: full)
		local  bool
	}{{"full bucket", 0, true}, {"bucket under the load-back", 0.35, false}} {
		t.Run(c.name, func(t *testing.T) {
			x := tierWorld(50e9, 0.012)
			blocks := make([]uint64, 130)
			for i := range blocks {
				blocks[i] = uint64(i + 1)
			}
			d := x.Begin(0, Request{Session: "s", Turn: 1, Blocks: blocks[:100], Input: 100_000, Output: 101})
			d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
			if d.Action().Kind != ActSeed {
				t.Fatalf("turn 1: %v %q, want a seed through P; path %v", d.Action().Kind, d.Mode(), d.Path())
			}
			d.Accepted()
			d.PrefillDone()
			d.Finished(true)
			x.SessionDemoted(0, "s")
			x.cfg.V3.DBudgetTokens = 1 << 20 // turn 1 went through P (no budget then)
			if c.bucket > 0 {
				x.v4Grow()
				x.v4.d[0] = stallBucket{level: c.bucket, at: 100, used: true}
			}
			d = x.Begin(100, Request{Session: "s", Turn: 2, Blocks: blocks, Input: 130_000, Output: 101})
			d.Reply(AdmitReply{CanAdmit: true, Reason: "session-was-evicted", Tier: TierHost, CachedTokens: 100_000, HostTokens: 100_000})
			if tier, hbm, host, _ := x.TierTokens("s"); tier != TierHost || hbm != 0 || host != 100_000 {
				t.Fatalf("after the seed answer: %q %d/%d, want host with 100,000 host tokens", tier, hbm, host)
			}
			if !c.local {
				if d.Action().Kind != ActSeed || d.Mode() == ModeLocalReseed {
					t.Fatalf("got %v %q, want a reseed through P (load-back stall 0.4197 s over 0.35 s); path %v", d.Action().Kind, d.Mode(), d.Path())
				}
				return
			}
			if d.Action().Kind != ActDirect || d.Mode() != ModeLocalReseed {
				t.Fatalf("got %v %q, want a local reseed on d0 (30,000 to compute, as on P); path %v", d.Action().Kind, d.Mode(), d.Path())
			}
			before, _ := x.V4Stall()
			d.Accepted()
			if drawn, _ := x.V4Stall(); math.Abs(drawn-before-0.4197184) > 1e-9 {
				t.Fatalf("v4 drew %v s for the local reseed, want 0.4197184 (compute with the load-back)", drawn-before)
			}
			if tier, _, host, _ := x.TierTokens("s"); tier != TierHBM || host != 0 {
				t.Fatalf("after the placement: %q with %d host tokens, want hbm", tier, host)
			}
		})
	}
}

// The tier cost's helpers by hand, in powers of two: a host link of 1,024
// bytes/s after 0.5 s of setup and 2 bytes of KV a token loads 512 tokens
// in 1.5 s; a 2,048-token prefill in 1,024-token chunks (0.25 s a chunk,
// 1/1024 s a token) takes 2.5 s, and the load rides on its first chunk
// (1.25 s) over 4 layers: max(1.25 + 1.5/4, 1.5 + 1.25/4) = 1.8125 s in
// place of 1.25, 3.0625 s in all; in one chunk (2.25 s) the load adds
// max(2.25 + 0.375, 1.5 + 0.5625) − 2.25 = 0.375 s.
func TestTierCostHelpersByHand(t *testing.T) {
	for _, c := range []struct {
		tc   TierCost
		want bool
	}{{TierCost{}, false}, {TierCost{HostBandwidth: 1}, false}, {TierCost{KVBytesPerToken: 1}, false}, {TierCost{HostBandwidth: 1, KVBytesPerToken: 1}, true}} {
		if got := c.tc.On(); got != c.want {
			t.Errorf("%+v.On() = %v, want %v", c.tc, got, c.want)
		}
	}
	tc := TierCost{HostBandwidth: 1024, HostSetupS: 0.5, XferBandwidth: 2048, XferSetupS: 0.25, KVBytesPerToken: 2, Layers: 4}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"LoadS(512)", tc.LoadS(512), 1.5},
		{"LoadS(0)", tc.LoadS(0), 0},
		{"LoadS(-1)", tc.LoadS(-1), 0},
		{"LoadS with no host link", TierCost{HostSetupS: 0.5, KVBytesPerToken: 2}.LoadS(512), 0},
		{"TransferS(1024)", tc.TransferS(1024), 1.25},
		{"TransferS(0)", tc.TransferS(0), 0},
		{"TransferS with no link", TierCost{XferSetupS: 0.25, KVBytesPerToken: 2}.TransferS(1024), 0},
		{"PrefillWithLoadS, chunked", tc.PrefillWithLoadS(StallCost{OverheadS: 0.25, PerTokenS: 1.0 / 1024, ChunkTokens: 1024}, 2048, 0, 512), 3.0625},
		{"PrefillWithLoadS, one chunk", tc.PrefillWithLoadS(StallCost{OverheadS: 0.25, PerTokenS: 1.0 / 1024}, 2048, 0, 512), 2.625},
		{"PrefillWithLoadS, nothing on host", tc.PrefillWithLoadS(StallCost{OverheadS: 0.25, PerTokenS: 1.0 / 1024, ChunkTokens: 1024}, 2048, 0, 0), 2.5},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}
