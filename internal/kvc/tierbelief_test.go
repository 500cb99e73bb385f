package kvc

import (
	"math"
	"strings"
	"testing"
)

// TestSessionStoredKeepsPin: a decoder's report that it evicted a session
// from HBM that its host tier could not keep but its storage pool holds
// (the engine's Event.Stored) keeps the session pinned there at the
// storage tier, with the tokens it held (160: prompt and output), so its
// next turn is asked of that decoder first; the decoder's storage answer
// (with a host part) is believed as it says, and the placement makes the
// session HBM-resident again. Without it the simulator reported an
// eviction: pin and tier forgotten (Tier none). A report from a decoder
// the session has left is an eviction there.
func TestSessionStoredKeepsPin(t *testing.T) {
	w := newLabelWorld(t, nil, Options{Alpha: 1})
	w.run("s", 1, seedAll, true)
	resident := w.x.Snapshot().Resident["s"]
	w.x.SessionStored(0, "s")
	if tier, hbm, host, st := w.x.TierTokens("s"); tier != TierStorage || hbm != 0 || host != 0 || st != resident || resident == 0 {
		t.Fatalf("after the storage report: %q %d/%d/%d, want storage with the %d resident tokens", tier, hbm, host, st, resident)
	}
	if pin, ok := w.x.Snapshot().Pins["s"]; !ok || pin != 0 {
		t.Fatalf("after the storage report: pinned %v to d%d, want d0 kept", ok, pin)
	}
	var asked []int
	d := w.run("s", 2, func(i int) AdmitReply {
		asked = append(asked, i)
		if i == 0 {
			return AdmitReply{CanAdmit: true, Direct: true, Tier: TierStorage, CachedTokens: 160, HostTokens: 40, StorageTokens: 110}
		}
		return seedAll(i)
	}, true)
	if len(asked) == 0 || asked[0] != 0 || d.Decoder() != 0 || d.Mode() != "kvcache-direct-to-d-session" {
		t.Fatalf("turn 2 asked %v, went to d%d as %q; want d0 first, direct", asked, d.Decoder(), d.Mode())
	}
	if p := strings.Join(d.Path(), "; "); !strings.Contains(p, "from its storage tier (110 of 160 cached tokens prefetched, then loaded back)") {
		t.Fatalf("path %q does not say the append came from storage", p)
	}
	if got := w.x.Tier("s"); got != TierHBM {
		t.Fatalf("after the append: tier %q, want hbm", got)
	}
	w.x.SessionStored(1, "s") // d1 never held it: an eviction there, d0 kept
	if got := w.x.Tier("s"); got != TierHBM {
		t.Fatalf("a storage report from another decoder: tier %q, want hbm", got)
	}
	// With one pool for every decoder the storage report is an eviction
	// (any decoder reads the session over its own link), and under
	// best_effort too (storage tokens are priced as computed).
	for _, set := range []func(*TierCost){func(c *TierCost) { c.StorageShared = true }, func(c *TierCost) { c.StorageBestEffort = true }} {
		w2 := newLabelWorld(t, nil, Options{Alpha: 1})
		set(&w2.x.cfg.V3.Tiers)
		w2.run("s", 1, seedAll, true)
		w2.x.SessionStored(0, "s")
		if got := w2.x.Tier("s"); got != TierNone {
			t.Fatalf("%+v: after the storage report tier %q, want none (tied to no decoder)", w2.x.cfg.V3.Tiers, got)
		}
	}
	// A storage answer with a host part is believed with both.
	x := tierWorld(50e9, 0)
	secondTurnOnD0(t, x, "s", nil, AdmitReply{CanAdmit: true, Direct: true, Tier: TierStorage, CachedTokens: 100_000, HostTokens: 40_000, StorageTokens: 60_000})
	if tier, hbm, host, st := x.TierTokens("s"); tier != TierStorage || hbm != 0 || host != 40_000 || st != 60_000 {
		t.Fatalf("after a storage answer with a host part: %q %d/%d/%d, want storage 0/40,000/60,000", tier, hbm, host, st)
	}
}

// TestStorageAnswerWithHostPart: a partial host hit the storage pool
// extends (the engine answers tier storage with both parts) is costed
// with both: of 100,000 cached tokens 50,000 on host and 50,000 in
// storage (tierWorld: 100,000 B a token, 50 GB/s host link, 50 layers, a
// 1,000-token append of 0.01 s). Over a 50 GB/s storage link with 1 ms
// setup the prefetch of 5 GB is 0.101 s, then all 100,000 load back
// beside the append: max(0.01 + 0.2/50, 0.2 + 0.01/50) = 0.2002 s, 0.3012
// s in all, under the 0.414 s reseed: loaded back, v4 (a 1 s bucket)
// draws the 0.2002 s step (the prefetch waits in the queue). Over 10 GB/s the prefetch is 0.501 s, 0.7012 s in all:
// reseeded through P. With no storage link known the host part is still
// costed (the storage part counts as cached): max(0.01 + 0.1/50, 0.1 +
// 0.01/50) = 0.1002 s drawn, where before the whole answer went uncosted
// and v4 drew the append's 0.01 s.
func TestStorageAnswerWithHostPart(t *testing.T) {
	rep := AdmitReply{CanAdmit: true, Direct: true, Tier: TierStorage, CachedTokens: 100_000, HostTokens: 50_000, StorageTokens: 50_000}
	for _, c := range []struct {
		name   string
		bw     float64
		direct bool
		drawn  float64
	}{
		// The 0.101 s prefetch waits in the queue (engine/storagepark.go):
		// v4 draws the 0.2002 s step only.
		{"50 GB/s storage link", 50e9, true, 0.2002},
		{"10 GB/s storage link", 10e9, false, 0},
		{"no storage link", 0, true, 0.1002},
	} {
		t.Run(c.name, func(t *testing.T) {
			x := tierWorld(50e9, 0.012)
			x.cfg.V3.Tiers.StorageBandwidth, x.cfg.V3.Tiers.StorageSetupS = c.bw, 0.001
			d := secondTurnOnD0(t, x, "s", nil, rep)
			if !c.direct {
				if d.Action().Kind != ActSeed || d.Mode() != ModeHostReseed {
					t.Fatalf("got %v %q, want a reseed through P (0.414 s < 0.7012 s); path %v", d.Action().Kind, d.Mode(), d.Path())
				}
				return
			}
			if d.Action().Kind != ActDirect {
				t.Fatalf("got %v %q, want a direct append; path %v", d.Action().Kind, d.Mode(), d.Path())
			}
			before, _ := x.V4Stall()
			d.Accepted()
			if drawn, _ := x.V4Stall(); math.Abs(drawn-before-c.drawn) > 1e-9 {
				t.Fatalf("v4 drew %v s, want %v", drawn-before, c.drawn)
			}
		})
	}
}

// Answers tier costing and the belief leave alone, and best_effort's
// context: a storage answer that names no storage tokens (tier storage,
// 0 storage, 0 host: nothing below HBM to load) is neither costed (no
// "tier costing" in the path) nor believed (the session stays hbm), nor is
// one with storage tokens but no storage link and no host part. Under
// best_effort the storage tokens are computed after the HBM-cached
// prefix only: 1,000 appended after 100,000 cached of which 100,000 in
// storage is PrefillS(101,000, 0) = 1.01 s of tokens + 1e-12 × 101,000 ×
// 50,500 = 0.0051005 s of attention (13 chunks, no overhead): 1.0151005 s,
// not the 1.0353005 s of counting them as context.
func TestStorageAnswersLeftAlone(t *testing.T) {
	for _, c := range []struct {
		name string
		bw   float64
		rep  AdmitReply
	}{
		{"no storage tokens", 50e9, AdmitReply{CanAdmit: true, Direct: true, Tier: TierStorage, CachedTokens: 100_000}},
		{"no storage link, no host part", 0, AdmitReply{CanAdmit: true, Direct: true, Tier: TierStorage, CachedTokens: 100_000, StorageTokens: 100_000}},
	} {
		x := tierWorld(50e9, 0)
		x.cfg.V3.Tiers.StorageBandwidth = c.bw
		d := secondTurnOnD0(t, x, "s", nil, c.rep)
		if d.Action().Kind != ActDirect || strings.Contains(strings.Join(d.Path(), "; "), "tier costing") {
			t.Fatalf("%s: %v %q, path %v; want a direct append, not costed", c.name, d.Action().Kind, d.Mode(), d.Path())
		}
		if c.rep.StorageTokens == 0 {
			if tier, _, _, _ := x.TierTokens("s"); tier != TierHBM {
				t.Fatalf("%s: believed %q, want hbm", c.name, tier)
			}
		}
	}
	best := TierCost{KVBytesPerToken: 100_000, Layers: 50, HostBandwidth: 50e9, StorageBandwidth: 50e9, StorageBestEffort: true}
	sc := StallCost{PerTokenS: 1e-5, AttnS: 1e-12, ChunkTokens: 8192}
	if got := best.PrefillWithTiersS(sc, 1000, 100_000, 0, 100_000); math.Abs(got-1.0151005) > 1e-9 {
		t.Fatalf("best_effort with attention: %v s, want 1.0151005", got)
	}
}
