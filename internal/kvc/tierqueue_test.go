package kvc

import (
	"math"
	"testing"
)

// The shared pool's queue and the decoder's own queue in a storage
// answer's price (tierWorld's 100,000-token session, 100,000 B a token, a
// 50 GB/s storage link of 1 ms setup: its own prefetch 0.001 + 10 GB ÷
// 50 GB/s = 0.201 s). By hand:
//   - the pool at 100 GB/s aggregate, booked 0.15 s ahead: 0.15 + 10 GB ÷
//     100 GB/s + 0.001 = 0.251 s, later than the own link's 0.201 s; booked
//     0.05 s ahead: 0.151 s, the own link binds (0.201 s); at 20 GB/s with
//     nothing booked: 0.5 + 0.001 = 0.501 s;
//   - wait_complete, the request expected to queue 0.101 s on the decoder
//     (its prefetch runs meanwhile): the step waits 0.201 − 0.101 = 0.1 s
//     more, then loads all 100,000 beside the 1,000-token append (0.2002 s):
//     0.3002 s;
//   - best_effort, the same 0.101 s queue: pages arrive evenly from the
//     setup to 0.201 s, so (0.101 − 0.001) ÷ 0.2 = half, 50,000 tokens,
//     are loaded and 50,000 computed: 51,000 tokens at 10 µs = 0.51 s, of
//     which the first 8,192-token chunk (0.08192 s) carries the 5 GB load
//     (0.1 s) over 50 layers: max(0.08192 + 0.002, 0.1 + 0.0016384) =
//     0.1016384 s, so 0.51 − 0.08192 + 0.1016384 = 0.5297184 s; queued
//     0.201 s or more: all arrive (0.2002 s); at most the setup: none, all
//     101,000 computed (1.01 s).
func TestStorageQuoteByHand(t *testing.T) {
	full := TierCost{KVBytesPerToken: 100_000, Layers: 50, HostBandwidth: 50e9, StorageBandwidth: 50e9, StorageSetupS: 0.001}
	pool := full
	pool.StoragePoolBandwidth = 100e9
	slow := full
	slow.StoragePoolBandwidth = 20e9
	best := full
	best.StorageBestEffort = true
	sc := StallCost{PerTokenS: 1e-5, ChunkTokens: 8192}
	q := func(ahead float64) StorageQuote { return StorageQuote{Tokens: 100_000, AheadS: ahead} }
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"pool booked 0.15 s ahead", pool.PrefetchDoneS(100_000, 0.15), 0.251},
		{"pool booked 0.05 s ahead: own link binds", pool.PrefetchDoneS(100_000, 0.05), 0.201},
		{"slow pool, nothing booked", slow.PrefetchDoneS(100_000, 0), 0.501},
		{"pool bandwidth unknown: queue ignored", full.PrefetchDoneS(100_000, 0.15), 0.201},
		{"no tokens", pool.PrefetchDoneS(0, 0.15), 0},
		{"wait_complete, queued 0.101 s", full.PrefillWithQuoteS(sc, 1000, 100_000, 0, q(0.101)), 0.3002},
		{"wait_complete, queued past the prefetch", full.PrefillWithQuoteS(sc, 1000, 100_000, 0, q(0.5)), 0.2002},
		{"wait_complete, pool queue 0.15 s, queued 0.101 s", pool.PrefillWithQuoteS(sc, 1000, 100_000, 0,
			StorageQuote{Tokens: 100_000, PoolQueueS: 0.15, AheadS: 0.101}), 0.251 - 0.101 + 0.2002},
		{"best_effort, queued 0.101 s: half arrives", best.PrefillWithQuoteS(sc, 1000, 100_000, 0, q(0.101)), 0.5297184},
		{"best_effort, queued 0.201 s: all arrive", best.PrefillWithQuoteS(sc, 1000, 100_000, 0, q(0.201)), 0.2002},
		{"best_effort, queued the setup: none", best.PrefillWithQuoteS(sc, 1000, 100_000, 0, q(0.001)), 1.01},
		{"best_effort, not queued: none", best.PrefillWithQuoteS(sc, 1000, 100_000, 0, q(0)), 1.01},
	} {
		if math.Abs(c.got-c.want) > 1e-9 {
			t.Errorf("%s = %.9f, want %.9f", c.name, c.got, c.want)
		}
	}
	if _, got := best.StoragePrefetch(q(0.101)); got != 50_000 {
		t.Errorf("best_effort queued 0.101 s: %d tokens arrive, want 50,000", got)
	}
	if w, got := full.StoragePrefetch(StorageQuote{}); w != 0 || got != 0 {
		t.Errorf("an empty quote waits %v s for %d tokens, want nothing", w, got)
	}
}

// The queues move a placement. tierWorld's second turn answered from
// storage (100,000 tokens; the reseed through the idle P costs 0.414 s,
// TestTierCostByHand):
//   - the shared pool at 100 GB/s booked 0.15 s ahead: 0.251 + 0.2002 =
//     0.4512 s > 0.414 s, reseeded through P; with nothing booked the own
//     link's 0.4012 s is loaded back (TestTierCostStorageByHand);
//   - wait_complete with 10,100 tokens queued on d0 (0.101 s: two chunks
//     at 10 µs a token): 0.101 + 0.1 + 0.2002 = 0.4012 s < 0.414 s, loaded
//     back (it used to cost 0.101 + 0.4012 s and reseed), and v4 draws the
//     0.2002 s step: the 0.1 s wait is spent in the queue, not in a step;
//   - best_effort with the same queue and 50,000 tokens queued on P
//     (0.5 s): load-back 0.101 + 0.5297184 = 0.6307 s < reseed 0.914 s,
//     loaded back (it used to price all 100,000 computed: 0.101 + 1.01 s,
//     and reseed).
func TestStorageQueuesMovePlacement(t *testing.T) {
	world := func(slo float64, set func(*Dispatcher)) *Dispatcher {
		x := tierWorld(50e9, slo)
		x.cfg.V3.Tiers.StorageBandwidth, x.cfg.V3.Tiers.StorageSetupS = 50e9, 0.001
		set(x)
		return x
	}
	rep := AdmitReply{CanAdmit: true, Direct: true, Tier: TierStorage, CachedTokens: 100_000, StorageTokens: 100_000}
	turn2 := func(x *Dispatcher, dq, pq int, rep AdmitReply) *Dispatch {
		return secondTurnOnD0(t, x, "s", func() {
			x.ensureLoad()
			x.load.d[0], x.load.p[0] = dq, pq
		}, rep)
	}
	t.Run("pool queue: reseeded", func(t *testing.T) {
		x := world(0, func(x *Dispatcher) { x.cfg.V3.Tiers.StoragePoolBandwidth = 100e9 })
		queued := rep
		queued.StorageQueueS = 0.15
		if d := turn2(x, 0, 0, queued); d.Action().Kind != ActSeed || d.Mode() != ModeHostReseed {
			t.Fatalf("got %v %q, want a reseed through P (0.4512 s > 0.414 s); path %v", d.Action().Kind, d.Mode(), d.Path())
		}
		x = world(0, func(x *Dispatcher) { x.cfg.V3.Tiers.StoragePoolBandwidth = 100e9 })
		if d := turn2(x, 0, 0, rep); d.Action().Kind != ActDirect {
			t.Fatalf("nothing booked: got %v %q, want the load-back (0.4012 s); path %v", d.Action().Kind, d.Mode(), d.Path())
		}
	})
	t.Run("wait_complete: the queue overlaps the prefetch", func(t *testing.T) {
		x := world(0.012, func(*Dispatcher) {})
		d := turn2(x, 10_100, 0, rep)
		if d.Action().Kind != ActDirect {
			t.Fatalf("got %v %q, want the load-back (0.4012 s < 0.414 s); path %v", d.Action().Kind, d.Mode(), d.Path())
		}
		before, _ := x.V4Stall()
		d.Accepted()
		if drawn, _ := x.V4Stall(); math.Abs(drawn-before-0.2002) > 1e-9 {
			t.Fatalf("v4 drew %v s, want the 0.2002 s step (the 0.1 s wait is in the queue)", drawn-before)
		}
	})
	t.Run("best_effort: what arrives while it queues", func(t *testing.T) {
		x := world(0, func(x *Dispatcher) { x.cfg.V3.Tiers.StorageBestEffort = true })
		if d := turn2(x, 10_100, 50_000, rep); d.Action().Kind != ActDirect {
			t.Fatalf("got %v %q, want the load-back (0.6307 s < 0.914 s); path %v", d.Action().Kind, d.Mode(), d.Path())
		}
	})
}

// A decoder that admits the append sooner than its queue (shortest first,
// or the bypass past a long chunked prefill: the 1,000-token append fits a
// bypass of 1,000) is not priced as overlapping that queue: the 0.101 s
// queue no longer hides the prefetch, 0.101 + 0.201 + 0.2002 = 0.5022 s
// > 0.414 s, reseeded, as before the queue was counted; a bypass of 999
// does not take the append, so the queue counts (loaded back).
func TestStorageQuoteQueueOrder(t *testing.T) {
	rep := AdmitReply{CanAdmit: true, Direct: true, Tier: TierStorage, CachedTokens: 100_000, StorageTokens: 100_000}
	for _, c := range []struct {
		name     string
		shortest bool
		bypass   int
		want     ActionKind
	}{
		{"arrival order", false, 0, ActDirect},
		{"shortest first", true, 0, ActSeed},
		{"bypass takes it", false, 1000, ActSeed},
		{"bypass too small", false, 999, ActDirect},
	} {
		x := tierWorld(50e9, 0)
		x.cfg.V3.Tiers.StorageBandwidth, x.cfg.V3.Tiers.StorageSetupS = 50e9, 0.001
		x.cfg.V3.Tiers.ShortestFirst, x.cfg.V3.Tiers.BypassTokens = c.shortest, c.bypass
		d := secondTurnOnD0(t, x, "s", func() {
			x.ensureLoad()
			x.load.d[0] = 10_100
		}, rep)
		if d.Action().Kind != c.want {
			t.Errorf("%s: got %v %q, want %v; path %v", c.name, d.Action().Kind, d.Mode(), c.want, d.Path())
		}
	}
}

// v4 draws a best_effort load-back's step with the storage tokens that
// arrive while the request queues loaded and the rest computed (tiered
// keeps the queue the placement was priced at). tierWorld at a 13 ms TPOT
// SLO (a bucket of (13 − 2) ms × 100 = 1.1 s), 10,100 tokens queued on d0 (0.101 s) and 100,000 on
// P (1 s: the reseed costs 1.414 s): half the 100,000 storage tokens
// arrive, the step is 0.5297184 s (TestStorageQuoteByHand) and is drawn.
// When the decoders' bypass takes the 1,000-token append past that queue
// nothing is priced as arrived: 101,000 tokens computed, 1.01 s drawn.
// Without a storage link known nothing is priced as arrived either.
func TestStorageBestEffortDrawsWhatArrives(t *testing.T) {
	rep := AdmitReply{CanAdmit: true, Direct: true, Tier: TierStorage, CachedTokens: 100_000, StorageTokens: 100_000}
	for _, c := range []struct {
		bypass int
		drawn  float64
	}{{0, 0.5297184}, {1000, 1.01}} {
		x := tierWorld(50e9, 0.013)
		tc := &x.cfg.V3.Tiers
		tc.StorageBandwidth, tc.StorageSetupS, tc.StorageBestEffort, tc.BypassTokens = 50e9, 0.001, true, c.bypass
		d := secondTurnOnD0(t, x, "s", func() {
			x.ensureLoad()
			x.load.d[0], x.load.p[0] = 10_100, 100_000
		}, rep)
		if d.Action().Kind != ActDirect {
			t.Fatalf("bypass %d: got %v %q, want the load-back; path %v", c.bypass, d.Action().Kind, d.Mode(), d.Path())
		}
		before, _ := x.V4Stall()
		d.Accepted()
		if drawn, _ := x.V4Stall(); math.Abs(drawn-before-c.drawn) > 1e-9 {
			t.Fatalf("bypass %d: v4 drew %v s, want %v", c.bypass, drawn-before, c.drawn)
		}
	}
	nolink := TierCost{KVBytesPerToken: 100_000, StorageBestEffort: true}
	if w, got := nolink.StoragePrefetch(StorageQuote{Tokens: 100_000, AheadS: 1}); w != 0 || got != 0 {
		t.Fatalf("no storage link: %v s, %d tokens arrived; want none", w, got)
	}
}
