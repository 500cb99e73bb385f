package kvc

import (
	"math"
	"testing"
)

// hostTurn2 is onHost without its reply: turn 1 seeded on d0 and
// demoted to its host tier, turn 2 (a 1,000-token append) asked of d0.
func hostTurn2(t *testing.T, x *Dispatcher) *Dispatch {
	t.Helper()
	blocks := make([]uint64, 101)
	for i := range blocks {
		blocks[i] = uint64('s')<<32 | uint64(i+1)
	}
	d := x.Begin(0, Request{Session: "s", Turn: 1, Blocks: blocks[:100], Input: 100_000, Output: 101})
	d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
	d.Accepted()
	d.Finished(true)
	x.SessionDemoted(0, "s")
	d = x.Begin(100, Request{Session: "s", Turn: 2, Blocks: blocks, Input: 101_000, Output: 101})
	if d.Action().Kind != ActAdmit || d.Action().D != 0 {
		t.Fatalf("turn 2 not asked of d0 first: %+v", d.Action())
	}
	return d
}

var hostReply = AdmitReply{CanAdmit: true, Direct: true, Tier: TierHost, CachedTokens: 100_000, HostTokens: 100_000}

// The tier costs with attention (0.1 ns a token per token of context) in
// tierWorld: the append's 1,000 tokens after 100,000 cached take 0.01 +
// 1e-10·1,000·100,500 = 0.02005 s, on P as on d0. The reseed is that
// plus the 0.404 s transfer, 0.42405 s; the load-back's step
// max(0.02005 + 0.2/50, 0.2 + 0.02005/50) = 0.200401 s, within a 0.3 s bucket. A bucket holding
// exactly that stall fits it.
func TestTierCostsWithAttentionByHand(t *testing.T) {
	x := tierWorld(50e9, 0.012)
	d := onHost(t, x, "s")
	x.cfg.V3.Isolation.Cost.AttnS = 1e-10
	x.v4Grow()
	x.v4.d[0] = stallBucket{level: 0.3, at: 100, used: true}
	ch := d.v3TierCosts(0, 0, hostReply)
	if math.Abs(ch.reseedS-0.42405) > 1e-9 || math.Abs(ch.loadS-0.200401) > 1e-9 || !ch.fits {
		t.Errorf("costs %+v, want reseed 0.42405 s, load-back 0.200401 s, fitting", ch)
	}
	x.v4.d[0] = stallBucket{level: x.cfg.V3.Tiers.PrefillWithLoadS(x.iso().Cost, 1000, 100_000, 100_000), at: 100, used: true}
	if ch := d.v3TierCosts(0, 0, hostReply); !ch.fits {
		t.Errorf("a bucket of exactly the stall: %+v, want it to fit", ch)
	}
	before, _ := x.V4Stall()
	d.Accepted()
	if drawn, _ := x.V4Stall(); math.Abs(drawn-before-0.200401) > 1e-9 {
		t.Errorf("the load-back drew %v s, want 0.200401", drawn-before)
	}
}

// A host-tier answer naming no host tokens is costed as no load-back:
// direct, though d0's queue (100,000 tokens, 1 s) makes any reseed
// through P cheaper.
func TestTierNoHostTokensStaysDirect(t *testing.T) {
	x := tierWorld(50e9, 0)
	d := hostTurn2(t, x)
	x.ensureLoad()
	x.load.d[0] = 100_000
	rep := hostReply
	rep.HostTokens = 0
	d.Reply(rep)
	if a := d.Action(); a.Kind != ActDirect {
		t.Errorf("host tier, 0 host tokens: %+v %s, want direct (path %v)", a, d.Mode(), d.Path())
	}
}

// The seed cap holds back a tier reseed only at the cap: over the slow
// host link (reseed cheaper) with seed-max-inflight 1, no seed in flight
// reseeds through P; one in flight loads back.
func TestTierReseedSeedCap(t *testing.T) {
	for _, c := range []struct {
		seeding int
		want    ActionKind
	}{{0, ActSeed}, {1, ActDirect}} {
		x := tierWorld(5e9, 0)
		x.cfg.SeedMaxInflight = 1
		d := hostTurn2(t, x)
		x.seeding[0] = c.seeding
		d.Reply(hostReply)
		if a := d.Action(); a.Kind != c.want {
			t.Errorf("%d seeds in flight, cap 1: %+v %s, want %v (path %v)", c.seeding, a, d.Mode(), c.want, d.Path())
		}
	}
}

// A tie between the load-back and the reseed loads back (the reseed must
// be cheaper). In powers of two: 1/1024 s a prefill token, a KV byte a
// token over 1,024 B/s links, one layer, 1,024-token blocks. Turn 2
// appends 1,024 tokens to the 102,400 on d0's host tier: the load-back is
// d0's queue q/1024 s plus max(1 + 100, 100 + 1) = 101 s; the reseed, P
// caching turn 1, 1 s of prefill plus the 101 s transfer of 103,424
// tokens. q = 1,024 ties at 102 s (loaded back), q = 1,025 does not.
func TestTierTieLoadsBack(t *testing.T) {
	for _, c := range []struct {
		q    int
		want ActionKind
	}{{1024, ActDirect}, {1025, ActSeed}} {
		v3 := V3Config{TypedRejects: true,
			Isolation: DecodeIsolation{Cost: StallCost{PerTokenS: 1.0 / 1024}},
			Tiers:     TierCost{KVBytesPerToken: 1, Layers: 1, HostBandwidth: 1024, XferBandwidth: 1024}}
		x := NewDispatcher(DispatchConfig{Mechanism: MechKVC, Policy: PolicyKVAware, Options: Options{Alpha: 1},
			TauReject: 3, TauAppend: 8192, MaxRetries: -1, SeedMinTurn: 1, Gate: GateWorker, Reset: ResetDirect, Belief: BeliefTrack,
			BlockSize: 1024, V3: v3}, []string{"p0"}, []string{"d0"}, Options{Alpha: 1}, Options{Alpha: 1})
		d := x.Begin(0, Request{Session: "s", Turn: 1, Blocks: seqBlocks(0, 100), Input: 102_400, Output: 101})
		d.Reply(AdmitReply{CanAdmit: true, Reason: "session-not-resident"})
		d.Accepted()
		d.Finished(true)
		x.SessionDemoted(0, "s")
		d = x.Begin(100, Request{Session: "s", Turn: 2, Blocks: seqBlocks(0, 101), Input: 103_424, Output: 101})
		x.ensureLoad()
		x.load.d[0] = c.q
		d.Reply(AdmitReply{CanAdmit: true, Direct: true, Tier: TierHost, CachedTokens: 102_400, HostTokens: 102_400})
		if a := d.Action(); a.Kind != c.want {
			t.Errorf("d0 queue %d: %+v %s, want %v (path %v)", c.q, a, d.Mode(), c.want, d.Path())
		}
	}
}
