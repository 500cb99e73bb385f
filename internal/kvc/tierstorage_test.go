package kvc

import (
	"math"
	"strings"
	"testing"
)

// onStorage is onHost's session whose turn 2 d0 answers direct from its
// storage tier: HBM and host hold none of it, storage all 100,000 cached
// tokens.
func onStorage(t *testing.T, x *Dispatcher, s string) *Dispatch {
	t.Helper()
	return secondTurnOnD0(t, x, s, nil, AdmitReply{CanAdmit: true, Direct: true, Tier: TierStorage, CachedTokens: 100_000, StorageTokens: 100_000})
}

// TestTierCostStorageByHand: a storage answer's 100,000 tokens (10 GB)
// are prefetched over the storage link, then loaded back over the 50 GB/s
// host link beside the 1,000-token append (tierWorld: max(0.01 + 0.2/50,
// 0.2 + 0.01/50) = 0.2002 s, TestTierCostByHand). Over a 50 GB/s storage
// link with 1 ms setup the prefetch is 0.001 + 0.2 = 0.201 s, the stall
// 0.4012 s: under the 0.414 s reseed through P, so the storage hit is
// loaded back and v4 (12 ms over 2 ms steps: a 1 s bucket) draws the
// load-back's 0.2002 s step: the prefetch waits in the queue, not in a step
// (engine/storagepark.go). Over 25 GB/s the prefetch is 0.401 s, the stall 0.6012
// s: the reseed through P is cheaper and runs. With no storage link known
// the answer is not costed: direct, as the engine answered. Under
// best_effort a request admitted at once has received nothing: the
// 100,000 storage tokens are computed with the append, 101,000 tokens at
// 10 µs = 1.01 s, and the reseed through P runs.
func TestTierCostStorageByHand(t *testing.T) {
	tc := TierCost{KVBytesPerToken: 100_000, StorageBandwidth: 50e9, StorageSetupS: 0.001}
	full := TierCost{KVBytesPerToken: 100_000, Layers: 50, HostBandwidth: 50e9, StorageBandwidth: 50e9, StorageSetupS: 0.001}
	best := full
	best.StorageBestEffort = true
	sc := StallCost{PerTokenS: 1e-5, ChunkTokens: 8192}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"PrefetchS(100000)", tc.PrefetchS(100_000), 0.201},
		{"PrefetchS(0)", tc.PrefetchS(0), 0},
		{"PrefetchS(-1)", tc.PrefetchS(-1), 0},
		{"PrefetchS with no storage link", TierCost{KVBytesPerToken: 100_000, StorageSetupS: 0.001}.PrefetchS(100_000), 0},
		{"PrefillWithTiersS, storage", full.PrefillWithTiersS(sc, 1000, 100_000, 0, 100_000), 0.4012},
		{"PrefillWithTiersS, no storage", full.PrefillWithTiersS(sc, 1000, 100_000, 100_000, 0), 0.2002},
		{"PrefillWithTiersS, best_effort", best.PrefillWithTiersS(sc, 1000, 100_000, 0, 100_000), 1.01},
	} {
		if math.Abs(c.got-c.want) > 1e-12 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	world := func(bw, slo float64) *Dispatcher {
		x := tierWorld(50e9, slo)
		x.cfg.V3.Tiers.StorageBandwidth, x.cfg.V3.Tiers.StorageSetupS = bw, 0.001
		return x
	}
	t.Run("storage hit loaded back", func(t *testing.T) {
		x := world(50e9, 0.012)
		d := onStorage(t, x, "s")
		if d.Action().Kind != ActDirect {
			t.Fatalf("got %v %q, want a direct append (0.4012 s < reseed 0.414 s); path %v", d.Action().Kind, d.Mode(), d.Path())
		}
		if p := strings.Join(d.Path(), "; "); !strings.Contains(p, "holds 100000 of 100000 cached tokens on storage: load-back 0.401 s, reseed through p0 0.414 s: load back") ||
			!strings.Contains(p, "from its storage tier (100000 of 100000 cached tokens prefetched, then loaded back)") {
			t.Fatalf("path %q does not carry the storage costs", p)
		}
		before, _ := x.V4Stall()
		d.Accepted()
		if drawn, _ := x.V4Stall(); math.Abs(drawn-before-0.2002) > 1e-9 {
			t.Fatalf("v4 drew %v s for the load-back, want its 0.2002 s step (the prefetch waits in the queue)", drawn-before)
		}
	})
	t.Run("slow storage link: reseeded", func(t *testing.T) {
		d := onStorage(t, world(25e9, 0), "s")
		if d.Action().Kind != ActSeed || d.Mode() != ModeHostReseed || d.Action().D != 0 {
			t.Fatalf("got %v %q to d%d, want a reseed through P to d0 (0.414 s < 0.6012 s); path %v", d.Action().Kind, d.Mode(), d.Action().D, d.Path())
		}
	})
	t.Run("best_effort: computed, reseeded", func(t *testing.T) {
		x := world(50e9, 0)
		x.cfg.V3.Tiers.StorageBestEffort = true
		if d := onStorage(t, x, "s"); d.Action().Kind != ActSeed || d.Mode() != ModeHostReseed {
			t.Fatalf("got %v %q, want a reseed through P (0.414 s < 1.01 s computing the 101,000 tokens); path %v", d.Action().Kind, d.Mode(), d.Path())
		}
	})
	t.Run("no storage link: not costed", func(t *testing.T) {
		if d := onStorage(t, world(0, 0), "s"); d.Action().Kind != ActDirect {
			t.Fatalf("got %v %q, want direct", d.Action().Kind, d.Mode())
		}
	})
}
