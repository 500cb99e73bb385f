package engine

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// hiWorker is a colocated worker with a prefix cache of pool tokens, 16-token
// blocks and, when ratio > 0, a host tier of ratio × pool under policy.
func hiWorker(t *testing.T, pool int64, ratio float64, policy WritePolicy) *Worker {
	t.Helper()
	w, err := New(Config{Name: "w", Profile: testProfile(t), BlockSize: 16, PoolTokens: pool, ChunkTokens: 8192,
		PrefixCache: true, HiCache: HiCacheConfig{Enabled: ratio > 0, Ratio: ratio, WritePolicy: policy}})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// turn runs one Full request alone on w from now to its end and returns
// it and the end time.
func turn(t *testing.T, w *Worker, now float64, id int64, sess string, blocks []uint64, input, output int) (*Request, float64) {
	t.Helper()
	r := &Request{ID: id, Kind: Full, Session: sess, Blocks: blocks, Input: input, Output: output}
	if err := w.Submit(now, r); err != nil {
		t.Fatal(err)
	}
	end, _ := drive(w, now)
	checkPool(t, w)
	checkHost(t, w)
	if r.Stage != StageDone {
		t.Fatalf("request %d in stage %d at the end", id, r.Stage)
	}
	return r, end
}

func checkHost(t *testing.T, w *Worker) {
	t.Helper()
	if w.host == nil {
		return
	}
	if err := w.host.tree.Check(); err != nil {
		t.Fatal(err)
	}
	if w.HostUsed() > w.host.capacity {
		t.Fatalf("host pool holds %d tokens, capacity %d", w.HostUsed(), w.host.capacity)
	}
	if w.host.tree.EvictableTokens() != w.host.tree.Tokens() {
		t.Fatalf("host tree: %d of %d tokens locked with no load in flight", w.host.tree.Tokens()-w.host.tree.EvictableTokens(), w.host.tree.Tokens())
	}
}

// overlapS is a prefill step's duration with a host load of tokens beside
// compute c seconds, layer by layer over the profile's PCIe Gen5 link.
func overlapS(w *Worker, c float64, tokens int) float64 {
	load := w.host.link.SetupS + float64(tokens)*float64(w.mdl.KVBytesPerToken())/w.host.link.BandwidthBytes
	return max(c+load/48, load+c/48)
}

// A session HBM evicted comes back from host: its next turn loads the
// 2,048-token prefix over PCIe (2,048 × 98,304 B = 201 MB in 3.65 ms) beside
// the 1,024-token prefill it still computes (30.1 ms), so the step costs
// 30.1 + 3.65/48 ms, where without the tier the turn computes 3,072 tokens.
func TestHiCacheDemotedTurnLoadsBack(t *testing.T) {
	a, b := chain(1, 192), chain(2, 188)
	for _, tiers := range []bool{false, true} {
		ratio := 0.0
		if tiers {
			ratio = 4
		}
		w := hiWorker(t, 4096, ratio, WriteThrough)
		_, now := turn(t, w, 0, 1, "a", a[:128], 2048, 1)
		_, now = turn(t, w, now+1, 2, "b", b, 3000, 1) // evicts a's prefix from HBM
		if m := w.PrefixMatch(a[:128], 2048); m != 0 {
			t.Fatalf("tiers %v: a's prefix still in HBM (%d tokens)", tiers, m)
		}
		start := now + 1
		prefilled := w.stats.PrefillTokens
		r, _ := turn(t, w, start, 3, "a", a, 3072, 1)
		ttft := r.FirstTokenAt - start
		if !tiers {
			if r.CachedTokens != 0 || w.stats.PrefillTokens-prefilled != 3072 {
				t.Fatalf("no tiers: cached %d, computed %d; want 0, 3072", r.CachedTokens, w.stats.PrefillTokens-prefilled)
			}
			want := w.tm.PrefillStepS() + w.tm.PrefillWorkS(3072, 0)
			if !near(ttft, want) {
				t.Fatalf("no tiers: TTFT %v, want the recompute %v", ttft, want)
			}
			continue
		}
		if r.CachedTokens != 2048 || w.stats.PrefillTokens-prefilled != 1024 {
			t.Fatalf("cached %d, computed %d; want 2048 loaded from host, 1024 computed", r.CachedTokens, w.stats.PrefillTokens-prefilled)
		}
		if w.stats.HostLoadedTokens != 2048 || w.stats.HostLoads != 1 {
			t.Fatalf("host loads %d of %d tokens, want 1 of 2048", w.stats.HostLoads, w.stats.HostLoadedTokens)
		}
		c := w.tm.PrefillStepS() + w.tm.PrefillWorkS(1024, 2048)
		if want := overlapS(w, c, 2048); !near(ttft, want) {
			t.Fatalf("TTFT %v, want compute %v + load hidden but a layer's share = %v", ttft, c, want)
		}
		if ttft > c*1.01 {
			t.Fatalf("TTFT %v: the 3.6 ms load should hide behind the %v compute", ttft, c)
		}
		// The loaded prefix is HBM's again.
		if m := w.PrefixMatch(a, 3072); m != 3072 {
			t.Fatalf("after the load HBM matches %d tokens, want 3072", m)
		}
	}
}

// A 100K-token session demoted to host and loaded back costs what the link
// allows: 9.83 GB over 55.2 GB/s = 178.1 ms, the 200-token append's 46 ms of
// compute hidden under it but one layer's share; recomputing it would take
// seconds (docs/engine.md, "Host KV tier").
func TestHiCache100KLoadDominates(t *testing.T) {
	w, err := New(Config{Name: "w", Profile: testProfile(t), BlockSize: 100, PoolTokens: 120000, ChunkTokens: 8192,
		PrefixCache: true, HiCache: HiCacheConfig{Enabled: true, Ratio: 2}})
	if err != nil {
		t.Fatal(err)
	}
	a, b := chain(1, 1002), chain(2, 1100)
	_, now := turn(t, w, 0, 1, "a", a[:1000], 100000, 1)
	_, now = turn(t, w, now+1, 2, "b", b, 110000, 1)
	start := now + 1
	r, _ := turn(t, w, start, 3, "a", a, 100200, 1)
	if r.CachedTokens != 100000 || w.stats.HostLoadedTokens != 100000 {
		t.Fatalf("cached %d, loaded %d; want 100000 from host", r.CachedTokens, w.stats.HostLoadedTokens)
	}
	load := w.host.link.TransferS(100000 * w.mdl.KVBytesPerToken())
	if load < 0.178 || load > 0.1782 {
		t.Fatalf("100K tokens over the host link: %v s, want 9.8304 GB / 55.2 GB/s + 11 us = 0.1781 s", load)
	}
	c := w.tm.PrefillStepS() + w.tm.PrefillWorkS(200, 100000)
	ttft := r.FirstTokenAt - start
	if want := load + c/48; !near(ttft, want) {
		t.Fatalf("TTFT %v, want load %v + compute %v / 48 layers = %v", ttft, load, c, want)
	}
	t.Logf("100K-token session: load-back TTFT %.1f ms (load %.1f ms, compute %.1f ms)", ttft*1e3, load*1e3, c*1e3)
}

// A full host pool evicts its own least recently used KV: with a host of
// 1.5 × a 4,096-token pool, the third session pushes the first out of host
// too, so the first one's next turn recomputes while the second's loads.
func TestHiCacheHostPoolFull(t *testing.T) {
	w := hiWorker(t, 4096, 1.5, WriteThrough)
	a, b, c := chain(1, 129), chain(2, 188), chain(3, 188)
	_, now := turn(t, w, 0, 1, "a", a[:128], 2048, 1)
	_, now = turn(t, w, now+1, 2, "b", b, 3000, 1)
	_, now = turn(t, w, now+1, 3, "c", c, 3000, 1)
	if w.HostCapacity() != 6144 || w.HostUsed() > 6144 {
		t.Fatalf("host capacity %d, used %d; want 6144 and within it", w.HostCapacity(), w.HostUsed())
	}
	if w.HostPrefixMatch(a[:128], 2048) != 0 || w.stats.HostEvictedTokens < 2048 {
		t.Fatalf("a still on host (%d tokens), host evicted %d: want a evicted from host", w.HostPrefixMatch(a[:128], 2048), w.stats.HostEvictedTokens)
	}
	if got := w.HostPrefixMatch(b, 3000); got != 3000 {
		t.Fatalf("host holds %d of b's 3000 tokens", got)
	}
	rb, now := turn(t, w, now+1, 4, "b", append(b[:188:188], 9<<32|1), 3016, 1)
	if rb.CachedTokens != 2992 || w.stats.HostLoadedTokens != 2992 {
		t.Fatalf("b's turn found %d tokens cached (%d loaded), want 2992 (its whole blocks) loaded from host", rb.CachedTokens, w.stats.HostLoadedTokens)
	}
	ra, _ := turn(t, w, now+1, 5, "a", a, 2064, 1)
	if ra.CachedTokens != 0 {
		t.Fatalf("a's turn found %d tokens cached, want a recompute", ra.CachedTokens)
	}
}

// What goes down to host, and when, follows the write policy.
func TestHiCacheWritePolicies(t *testing.T) {
	a, b := chain(1, 192), chain(2, 188)
	for _, tc := range []struct {
		policy                 WritePolicy
		afterFirst, afterEvict int // host tokens of a after its first turn, and after b evicted it
		afterReuse             int // after a's prefix was reused from HBM (no eviction)
	}{
		{WriteThrough, 2048, 2048, 2048},
		{WriteThroughSelective, 0, 0, 2048},
		{WriteBack, 0, 2048, 0},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			w := hiWorker(t, 4096, 4, tc.policy)
			_, now := turn(t, w, 0, 1, "a", a[:128], 2048, 1)
			if got := w.HostPrefixMatch(a[:128], 2048); got != tc.afterFirst {
				t.Fatalf("after the first turn host holds %d, want %d", got, tc.afterFirst)
			}
			w2 := hiWorker(t, 4096, 4, tc.policy)
			_, n2 := turn(t, w2, 0, 1, "a", a[:128], 2048, 1)
			turn(t, w2, n2+1, 2, "a", a[:130], 2080, 1)
			if got := w2.HostPrefixMatch(a[:128], 2048); got != tc.afterReuse {
				t.Fatalf("after a reuse from HBM host holds %d, want %d", got, tc.afterReuse)
			}
			_, now = turn(t, w, now+1, 2, "b", b, 3000, 1)
			if got := w.HostPrefixMatch(a[:128], 2048); got != tc.afterEvict {
				t.Fatalf("after HBM evicted a host holds %d, want %d", got, tc.afterEvict)
			}
			r, _ := turn(t, w, now+1, 3, "a", a, 3072, 1)
			if r.CachedTokens != tc.afterEvict {
				t.Fatalf("a's next turn cached %d, want %d", r.CachedTokens, tc.afterEvict)
			}
		})
	}
}

// An output tail HBM drops before its session's next turn is kept on host
// and named there, so the next turn loads prompt and output.
func TestHiCacheOutputTailDemoted(t *testing.T) {
	w := hiWorker(t, 4096, 4, WriteThrough)
	a, b := chain(1, 200), chain(2, 188)
	_, now := turn(t, w, 0, 1, "a", a[:128], 2048, 101) // 100 output tokens with KV
	_, now = turn(t, w, now+1, 2, "b", b, 3000, 1)
	r, _ := turn(t, w, now+1, 3, "a", a, 3200, 1)
	// The output fills blocks 128..133 whole (2,048 + 100 = 2,148 tokens).
	if r.CachedTokens != 134*16 {
		t.Fatalf("cached %d, want %d: prompt and output loaded from host", r.CachedTokens, 134*16)
	}
}

// The tier's size flags are checked.
func TestHiCacheConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		h    HiCacheConfig
		want string
	}{
		{HiCacheConfig{Enabled: true, Ratio: 1}, "expected > 1"},
		{HiCacheConfig{Enabled: true, SizeBytes: 1 << 20}, "--hicache-size"},
	} {
		_, err := New(Config{Name: "w", Profile: testProfile(t), BlockSize: 16, PoolTokens: 4096, PrefixCache: true, HiCache: tc.h})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%+v: error %v, want one naming %q", tc.h, err, tc.want)
		}
	}
	if _, err := ParseWritePolicy("write_around"); err == nil || !strings.Contains(err.Error(), "write_through_selective") {
		t.Fatalf("bad policy: %v", err)
	}
	// A worker without a prefix cache has nothing to demote.
	w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 16, PoolTokens: 4096, HiCache: HiCacheConfig{Enabled: true}})
	if err != nil || w.HostCapacity() != 0 {
		t.Fatalf("decoder without a prefix cache: %v, host %d", err, w.HostCapacity())
	}
}

// TestHiCacheProperty drives workers with a host tier under every write
// policy with random multi-turn sessions and aborts on small pools: KV
// accounting stays within both pools, the host tree stays consistent, no
// host path stays locked once nothing is loading, and every request ends.
func TestHiCacheProperty(t *testing.T) {
	p := testProfile(t)
	var loads int64
	for seed := uint64(1); seed <= 9; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		w, err := New(Config{Name: "w", Profile: p, BlockSize: 16, PoolTokens: 3000 + int64(rng.IntN(3000)),
			ChunkTokens: 512, MaxRunning: 1 + rng.IntN(6), PrefixCache: true, MixedChunk: seed%2 == 0,
			HiCache: HiCacheConfig{Enabled: true, Ratio: 1.2 + rng.Float64()*2, WritePolicy: WritePolicy(seed % 3)}})
		if err != nil {
			t.Fatal(err)
		}
		live := playTierLoad(t, w, rng, 8, func() {
			if w.HostUsed() > w.HostCapacity() {
				t.Fatalf("seed %d: host holds %d of %d", seed, w.HostUsed(), w.HostCapacity())
			}
		})
		checkPool(t, w)
		checkHost(t, w)
		for _, r := range live {
			if r.Stage != StageDone && r.Stage != StageAborted {
				t.Fatalf("seed %d: request %d left in stage %d", seed, r.ID, r.Stage)
			}
		}
		if w.stats.HostWrittenTokens == 0 {
			t.Fatalf("seed %d (%v): nothing was ever written to host", seed, WritePolicy(seed%3))
		}
		loads += w.stats.HostLoads
	}
	if loads == 0 {
		t.Fatal("no request ever loaded from host: the property test exercises no load-back")
	}
}

// playTierLoad plays the tier property tests' load on w: 400 steps of
// random multi-turn sessions (sessions of up to 2,500 tokens that grow and
// restart, 16-token blocks) and aborts, the pool and bounds checked after
// every event, then runs w to its end; it returns the requests submitted.
func playTierLoad(t *testing.T, w *Worker, rng *rand.Rand, sessions int, bounds func()) []*Request {
	t.Helper()
	chains := make([][]uint64, sessions)
	var live []*Request
	now := 0.0
	for i := 0; i < 400; i++ {
		now += rng.Float64() * 0.05
		for {
			tn, ok := w.NextTime()
			if !ok || tn > now {
				break
			}
			w.Advance(tn)
			w.TakeEvents()
			checkPool(t, w)
			bounds()
		}
		if op := rng.IntN(10); op < 8 {
			s := rng.IntN(len(chains))
			for k := rng.IntN(30) + 1; k > 0; k-- {
				chains[s] = append(chains[s], uint64(s)<<40|uint64(len(chains[s])+1))
			}
			if len(chains[s])*16 > 2500 {
				chains[s] = chains[s][:1]
			}
			input := (len(chains[s])-1)*16 + 1 + rng.IntN(16)
			r := &Request{ID: int64(i), Kind: Full, Blocks: append([]uint64(nil), chains[s]...), Input: input,
				Output: 1 + rng.IntN(60), Session: string(rune('a' + s))}
			if w.Submit(now, r) == nil {
				live = append(live, r)
			}
		} else if len(live) > 0 {
			w.Abort(now, live[rng.IntN(len(live))])
		}
	}
	drive(w, now)
	return live
}

// A KVC decoder with a host tier that trims a session keeps it on host:
// the eviction event says it was demoted, and the session's next turn is
// admitted as a direct append from host (Tier host, its 12,800 tokens to
// load back) instead of a reseed through P; the append then loads them and
// leaves the session resident in HBM again. Without the tier the same
// revisit is a seed.
func TestHiCacheSessionAdmittedFromHost(t *testing.T) {
	for _, tiers := range []bool{false, true} {
		w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: 30000,
			Session: SessionConfig{Enabled: true, Eviction: EvictSession},
			HiCache: HiCacheConfig{Enabled: tiers, Ratio: 3, WritePolicy: WriteThrough}})
		if err != nil {
			t.Fatal(err)
		}
		a, b := chain(1, 210), chain(2, 282)
		now := seedOn(t, w, 0, "a", a[:200], 12800, 4)
		rep := w.AdmitSession(now, AdmitQuery{Session: "b", Blocks: b, Input: 18000, Output: 4})
		if !rep.CanAdmit || rep.Mode != AdmitSeed || rep.Trimmed != 1 {
			t.Fatalf("tiers %v: b's admission %+v, want a seed that trims a", tiers, rep)
		}
		var demoted, evicted bool
		for _, ev := range w.TakeEvents() {
			if ev.Kind == EvSessionEvicted && ev.Session == "a" {
				evicted, demoted = true, ev.Demoted
			}
		}
		if !evicted || demoted != tiers {
			t.Fatalf("tiers %v: a evicted %v, demoted %v", tiers, evicted, demoted)
		}
		now = seedOn(t, w, now, "b", b, 18000, 4)
		q := AdmitQuery{Session: "a", Blocks: a, Input: 13440, Output: 4, MaxAppend: 1024}
		// The residency probe answers from the same tiers, touching nothing.
		res, cached, tier := w.SessionTier(now, q)
		if want := map[bool]string{false: TierNone, true: TierHost}[tiers]; res != tiers || tier != want || (tiers && cached != 12800) {
			t.Fatalf("tiers %v: probe says resident %v, %d cached, tier %q; want %v, tier %q", tiers, res, cached, tier, tiers, want)
		}
		rep = w.AdmitSession(now, q)
		if !tiers {
			if rep.Mode != AdmitSeed || rep.Tier != TierNone || rep.HostTokens != 0 {
				t.Fatalf("no tiers: revisit %+v, want a seed", rep)
			}
			continue
		}
		// An append too large for τ_append even after the host hit is no
		// refusal: the admission goes on as the seed it was without the tier.
		// The seed says what a prefill here would load back: host holds
		// 12,800 of the prompt, HBM none of it.
		if big := w.AdmitSession(now, AdmitQuery{Session: "a", Blocks: a, Input: 13440, Output: 4, MaxAppend: 100}); !big.CanAdmit || big.Mode != AdmitSeed || big.Reason != ReasonWasEvicted ||
			big.Tier != TierHost || big.HostTokens != 12800 || big.CachedTokens != 12800 {
			t.Fatalf("revisit with τ_append 100: %+v, want a seed (session-was-evicted) naming 12800 host tokens", big)
		}
		if !rep.CanAdmit || rep.Mode != AdmitDirect || rep.Tier != TierHost || rep.HostTokens != 12800 || rep.CachedTokens != 12800 {
			t.Fatalf("revisit %+v, want a direct append from host of 12800 tokens", rep)
		}
		r := &Request{ID: 9, Kind: Full, Session: "a", KeepSession: true, Blocks: a, Input: 13440, Output: 4}
		if err := w.Submit(now, r); err != nil {
			t.Fatal(err)
		}
		drive(w, now)
		checkPool(t, w)
		checkHost(t, w)
		if r.Stage != StageDone || r.CachedTokens != 12800 || w.stats.HostLoadedTokens != 12800 {
			t.Fatalf("append: stage %d, cached %d, loaded %d; want done with 12800 loaded", r.Stage, r.CachedTokens, w.stats.HostLoadedTokens)
		}
		if res, _ := w.SessionResidency(now, AdmitQuery{Session: "a", Blocks: a, Input: 13440}); !res {
			t.Fatal("a is not resident in HBM after its append from host")
		}
	}
}

// TestHiCacheDemoteIdle: under write_through_selective a session seeded on
// a decoder (12,800 tokens, never reused from HBM) has no host copy, so
// when the next session's admission trims it between its turns it is
// dropped, and its next turn is a seed that computes everything. With
// --hicache-demote-idle the trim writes its 12,800 tokens to host first
// (the host pool of 3 × 30,000 tokens has room): demoted, and its next
// turn is a direct append that loads the 12,800 back.
func TestHiCacheDemoteIdle(t *testing.T) {
	for _, idle := range []bool{false, true} {
		w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: 30000,
			Session: SessionConfig{Enabled: true, Eviction: EvictSession},
			HiCache: HiCacheConfig{Enabled: true, Ratio: 3, WritePolicy: WriteThroughSelective, DemoteIdle: idle}})
		if err != nil {
			t.Fatal(err)
		}
		a, b := chain(1, 210), chain(2, 282)
		now := seedOn(t, w, 0, "a", a[:200], 12800, 4)
		if got := w.HostPrefixMatch(a[:200], 12800); got != 0 {
			t.Fatalf("demote-idle %v: host holds %d of a before the trim, want 0 (selective: never reused)", idle, got)
		}
		if rep := w.AdmitSession(now, AdmitQuery{Session: "b", Blocks: b, Input: 18000, Output: 4}); rep.Trimmed != 1 {
			t.Fatalf("demote-idle %v: b's admission %+v, want one trim (a)", idle, rep)
		}
		demoted := false
		for _, ev := range w.TakeEvents() {
			if ev.Kind == EvSessionEvicted && ev.Session == "a" {
				demoted = ev.Demoted
			}
		}
		want := map[bool]int{false: 0, true: 12800}[idle]
		if got := w.HostPrefixMatch(a[:200], 12800); demoted != idle || got != want {
			t.Fatalf("demote-idle %v: a demoted %v, host holds %d; want %v and %d", idle, demoted, got, idle, want)
		}
		now = seedOn(t, w, now, "b", b, 18000, 4)
		rep := w.AdmitSession(now, AdmitQuery{Session: "a", Blocks: a, Input: 13440, Output: 4, MaxAppend: 1024})
		if idle && (rep.Mode != AdmitDirect || rep.Tier != TierHost || rep.HostTokens != 12800) {
			t.Fatalf("demote-idle: a's next turn %+v, want a direct append loading 12800 from host", rep)
		}
		if !idle && rep.Mode != AdmitSeed {
			t.Fatalf("no demote-idle: a's next turn %+v, want a seed", rep)
		}
		checkPool(t, w)
		checkHost(t, w)
	}
}

// TestHiCacheTrimHostFirst: a 10,000-token decoder holds sessions a, b and
// c (3,200 tokens each, seeded in that order, so a is the least recently
// used) under write_through_selective: none was reused from HBM, so none
// is on host, until b's path is written there (what a write-through copy
// does). d's seed needs 3,204 tokens with 388 free: one trim. By LRU it
// takes a, which host does not hold: dropped, its next turn recomputes
// 3,200 tokens. Host-first takes b instead, whose 3,200 tokens host holds:
// demoted, its next turn a direct append loading them back; a stays.
func TestHiCacheTrimHostFirst(t *testing.T) {
	for _, first := range []bool{false, true} {
		w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: 10000,
			Session: SessionConfig{Enabled: true, Eviction: EvictSession},
			HiCache: HiCacheConfig{Enabled: true, Ratio: 3, WritePolicy: WriteThroughSelective, TrimHostFirst: first}})
		if err != nil {
			t.Fatal(err)
		}
		blocks := map[string][]uint64{}
		now := 0.0
		for i, s := range []string{"a", "b", "c"} {
			blocks[s] = chain(uint64(i+1), 50)
			now = seedOn(t, w, now, s, blocks[s], 3200, 4)
		}
		w.hiWrite(now, blocks["b"], 64)
		if got := w.HostPrefixMatch(blocks["b"], 3200); got != 3200 {
			t.Fatalf("host holds %d of b, want 3200", got)
		}
		rep := w.AdmitSession(now, AdmitQuery{Session: "d", Blocks: chain(4, 50), Input: 3200, Output: 4})
		if !rep.CanAdmit || rep.Mode != AdmitSeed || rep.Trimmed != 1 {
			t.Fatalf("host-first %v: d's admission %+v, want a seed after one trim", first, rep)
		}
		want, demoted := map[bool]string{false: "a", true: "b"}[first], false
		var got []string
		for _, ev := range w.TakeEvents() {
			if ev.Kind == EvSessionEvicted {
				got = append(got, ev.Session)
				demoted = ev.Demoted
			}
		}
		if len(got) != 1 || got[0] != want || demoted != first {
			t.Fatalf("host-first %v: trimmed %v (demoted %v), want %s (demoted %v)", first, got, demoted, want, first)
		}
		next := w.AdmitSession(now, AdmitQuery{Session: want, Blocks: chain(map[string]uint64{"a": 1, "b": 2}[want], 60), Input: 3840, Output: 4})
		if wantHost := map[bool]int{false: 0, true: 3200}[first]; next.HostTokens != wantHost {
			t.Fatalf("host-first %v: %s's next turn %+v, want %d tokens from host", first, want, next, wantHost)
		}
		checkPool(t, w)
		checkHost(t, w)
	}
}

// TestHiCacheDemoteIdleExact: think-time demotion writes exactly the
// session's path to host — a partial last block counted as its own
// tokens, not a whole block — both when a trim evicts the idle session
// whole and when it cuts its tail (TrimTail).
func TestHiCacheDemoteIdleExact(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tail  bool
		input int   // a's prompt: 200 blocks, the last partial when < 12,800
		want  int64 // host tokens written for a
	}{
		{"whole, partial last block", false, 12780, 12780},
		{"whole, full blocks", false, 12800, 12800},
		{"tail trim", true, 12800, 12800},
		{"tail trim, partial last block", true, 12780, 12780},
	} {
		w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: 30000,
			Session: SessionConfig{Enabled: true, Eviction: EvictSession, TrimTail: tc.tail, TrimStallS: 0.5},
			HiCache: HiCacheConfig{Enabled: true, Ratio: 3, WritePolicy: WriteThroughSelective, DemoteIdle: true}})
		if err != nil {
			t.Fatal(err)
		}
		a, b := chain(1, 200), chain(2, 282)
		now := seedOn(t, w, 0, "a", a, tc.input, 4)
		before := w.Stats().HostWrittenTokens
		rep := w.AdmitSession(now, AdmitQuery{Session: "b", Blocks: b, Input: 18000, Output: 4})
		if !rep.CanAdmit || rep.Trimmed != 1 {
			t.Fatalf("%s: b's admission %+v, want one trim (a)", tc.name, rep)
		}
		if tc.tail && w.Stats().TailTrims != 1 {
			t.Fatalf("%s: %d tail trims, want 1", tc.name, w.Stats().TailTrims)
		}
		if got := w.Stats().HostWrittenTokens - before; got != tc.want {
			t.Errorf("%s: %d tokens of a written to host, want %d", tc.name, got, tc.want)
		}
		checkPool(t, w)
	}
}
