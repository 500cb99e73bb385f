package engine

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// stWorker is hiWorker's worker (a 4,096-token pool, a host of 1.5 × it =
// 6,144 tokens, write_through) with a storage tier of storage tokens over
// the profile's Mooncake link (37.5 GB/s, 100 µs setup).
func stWorker(t *testing.T, storage int64, sc StorageConfig) *Worker {
	t.Helper()
	p := testProfile(t)
	sc.Enabled, sc.Backend = true, "mooncake"
	sc.SizeBytes = storage * p.Model.KVBytesPerToken()
	w, err := New(Config{Name: "w", Profile: p, BlockSize: 16, PoolTokens: 4096, ChunkTokens: 8192,
		PrefixCache: true, HiCache: HiCacheConfig{Enabled: true, Ratio: 1.5, WritePolicy: WriteThrough, Storage: sc}})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// pastHost runs TestHiCacheHostPoolFull's three sessions: a's 2,048 tokens
// leave HBM, then host (its LRU), and only storage keeps them.
func pastHost(t *testing.T, w *Worker) (a []uint64, now float64) {
	t.Helper()
	a, b, c := chain(1, 129), chain(2, 188), chain(3, 188)
	_, now = turn(t, w, 0, 1, "a", a[:128], 2048, 1)
	_, now = turn(t, w, now+1, 2, "b", b, 3000, 1)
	_, now = turn(t, w, now+1, 3, "c", c, 3000, 1)
	if w.PrefixMatch(a[:128], 2048) != 0 || w.HostPrefixMatch(a[:128], 2048) != 0 {
		t.Fatalf("a still in HBM (%d) or host (%d)", w.PrefixMatch(a[:128], 2048), w.HostPrefixMatch(a[:128], 2048))
	}
	return a, now
}

// storageS is the prefetch of tokens over the worker's storage link.
func storageS(w *Worker, tokens int) float64 {
	return w.host.store.link.TransferS(int64(tokens) * w.mdl.KVBytesPerToken())
}

// A session demoted past host to storage pays the prefetch, then the
// load-back, not a recompute: under wait_complete a's next turn (2,064
// tokens, 2,048 in storage) waits 201 MB over the Mooncake link (0.1 +
// 5.37 ms), then loads them over PCIe beside its 16-token prefill; the
// same turn without the storage tier recomputes all 2,064 tokens.
func TestStorageDemotedPastHostPrefetches(t *testing.T) {
	w := stWorker(t, 20000, StorageConfig{Prefetch: PrefetchWaitComplete})
	a, now := pastHost(t, w)
	start := now + 1
	prefilled := w.stats.PrefillTokens
	r, _ := turn(t, w, start, 5, "a", a, 2064, 1)
	if r.CachedTokens != 2048 || w.stats.PrefillTokens-prefilled != 16 {
		t.Fatalf("cached %d, computed %d; want 2048 prefetched and loaded, 16 computed", r.CachedTokens, w.stats.PrefillTokens-prefilled)
	}
	if w.stats.StoragePrefetches != 1 || w.stats.StoragePrefetchedTokens != 2048 {
		t.Fatalf("%d prefetches of %d tokens, want 1 of 2048", w.stats.StoragePrefetches, w.stats.StoragePrefetchedTokens)
	}
	fetch := storageS(w, 2048)
	if fetch < 0.00546 || fetch > 0.00547 {
		t.Fatalf("2048 tokens over the Mooncake link: %v s, want 201.3 MB / 37.5 GB/s + 100 us = 5.468 ms", fetch)
	}
	c := w.tm.PrefillStepS() + w.tm.PrefillWorkS(16, 2048)
	ttft := r.FirstTokenAt - start
	if want := fetch + overlapS(w, c, 2048); !near(ttft, want) {
		t.Fatalf("TTFT %v, want prefetch %v + load beside compute %v = %v", ttft, fetch, overlapS(w, c, 2048), want)
	}
	recompute := w.tm.PrefillStepS() + w.tm.PrefillWorkS(2064, 0)
	if ttft >= recompute {
		t.Fatalf("TTFT %v through storage, not below the %v recompute", ttft, recompute)
	}
	if !near(w.stats.StorageWaitS, fetch) {
		t.Fatalf("waited %v for storage, want %v", w.stats.StorageWaitS, fetch)
	}
	checkStorage(t, w)
	// Without the storage tier the same turn recomputes.
	w2 := hiWorker(t, 4096, 1.5, WriteThrough)
	a2, now2 := pastHost(t, w2)
	r2, _ := turn(t, w2, now2+1, 5, "a", a2, 2064, 1)
	if r2.CachedTokens != 0 || !near(r2.FirstTokenAt-(now2+1), recompute) {
		t.Fatalf("no storage: cached %d, TTFT %v; want a recompute of %v", r2.CachedTokens, r2.FirstTokenAt-(now2+1), recompute)
	}
	t.Logf("2,048 tokens from storage: TTFT %.2f ms (prefetch %.2f ms), recompute %.2f ms", ttft*1e3, fetch*1e3, recompute*1e3)
}

func checkStorage(t *testing.T, w *Worker) {
	t.Helper()
	st := w.host.store
	if err := st.tree.Check(); err != nil {
		t.Fatal(err)
	}
	if st.tree.Tokens() > st.capacity {
		t.Fatalf("storage holds %d tokens, capacity %d", st.tree.Tokens(), st.capacity)
	}
	if st.tree.EvictableTokens() != st.tree.Tokens() {
		t.Fatalf("storage: %d tokens left locked", st.tree.Tokens()-st.tree.EvictableTokens())
	}
}

// best_effort does not wait: a turn admitted the instant it arrives finds
// nothing arrived from storage and computes its prompt, as without the
// tier; one admitted after waiting in the queue (behind a decode step)
// uses the whole pages that arrived meanwhile.
func TestStorageBestEffort(t *testing.T) {
	w := stWorker(t, 20000, StorageConfig{Prefetch: PrefetchBestEffort})
	a, now := pastHost(t, w)
	start := now + 1
	r, now := turn(t, w, start, 5, "a", a, 2064, 1)
	if recompute := w.tm.PrefillStepS() + w.tm.PrefillWorkS(2064, 0); r.CachedTokens != 0 || !near(r.FirstTokenAt-start, recompute) {
		t.Fatalf("admitted at once: cached %d, TTFT %v; want a recompute of %v", r.CachedTokens, r.FirstTokenAt-start, recompute)
	}
	if w.stats.StoragePrefetches != 0 {
		t.Fatalf("%d prefetches, want none arrived", w.stats.StoragePrefetches)
	}

	// Again, queued behind a decode step of another session.
	w = stWorker(t, 20000, StorageConfig{Prefetch: PrefetchBestEffort})
	a, now = pastHost(t, w)
	y := &Request{ID: 9, Kind: Full, Session: "y", Blocks: chain(7, 2), Input: 32, Output: 100}
	if err := w.Submit(now+1, y); err != nil {
		t.Fatal(err)
	}
	for y.Stage != StageDecoding || w.plan.decodeK == 0 {
		t1, _ := w.NextTime()
		w.Advance(t1)
	}
	// Mid-way through y's first decode step.
	at := w.stepStart + (w.stepStart+w.plan.base-w.stepStart)/2
	r = &Request{ID: 10, Kind: Full, Session: "a", Blocks: a, Input: 2064, Output: 1}
	if err := w.Submit(at, r); err != nil {
		t.Fatal(err)
	}
	drive(w, at)
	checkPool(t, w)
	checkStorage(t, w)
	waited := r.AdmittedAt - at
	arrived := int((waited - w.host.store.link.SetupS) * w.host.store.link.BandwidthBytes / float64(w.mdl.KVBytesPerToken()))
	if want := arrived / 16 * 16; r.CachedTokens != want || want <= 0 || want >= 2048 {
		t.Fatalf("queued %.2f ms: cached %d, want the %d tokens (whole pages) that arrived, some but not all", waited*1e3, r.CachedTokens, want)
	}
	if w.stats.StorageWaitS != 0 {
		t.Fatalf("best_effort waited %v", w.stats.StorageWaitS)
	}
}

// timeout waits up to base + per_ki_token · tokens / 1024 after the
// prefetch began: with 1 ms + 1 ms per 1024 tokens, 3 ms for 2,048 tokens,
// before their 5.47 ms prefetch is done, so the turn takes the whole pages
// that arrived in 3 ms ((3 − 0.1) ms × 37.5 GB/s = 1,106 tokens: 1,104) and
// computes the other 960.
func TestStorageTimeout(t *testing.T) {
	w := stWorker(t, 20000, StorageConfig{Prefetch: PrefetchTimeout, TimeoutBaseS: 0.001, TimeoutPerKiS: 0.001})
	a, now := pastHost(t, w)
	start := now + 1
	r, _ := turn(t, w, start, 5, "a", a, 2064, 1)
	if r.CachedTokens != 1104 || w.stats.StoragePrefetchedTokens != 1104 {
		t.Fatalf("cached %d, prefetched %d; want 1104", r.CachedTokens, w.stats.StoragePrefetchedTokens)
	}
	c := w.tm.PrefillStepS() + w.tm.PrefillWorkS(960, 1104)
	if want := 0.003 + overlapS(w, c, 1104); !near(r.FirstTokenAt-start, want) {
		t.Fatalf("TTFT %v, want 3 ms + load beside compute = %v", r.FirstTokenAt-start, want)
	}
	// A timeout past the prefetch is wait_complete.
	w = stWorker(t, 20000, StorageConfig{Prefetch: PrefetchTimeout})
	a, now = pastHost(t, w)
	r, _ = turn(t, w, now+1, 5, "a", a, 2064, 1)
	if r.CachedTokens != 2048 || !near(w.stats.StorageWaitS, storageS(w, 2048)) {
		t.Fatalf("default timeout (1.5 s): cached %d, waited %v; want 2048 after %v", r.CachedTokens, w.stats.StorageWaitS, storageS(w, 2048))
	}
}

// A full storage pool evicts its own least recently used KV: 7,000 tokens
// hold b and c (6,000) but not a as well, so a, gone from host, is gone
// from storage too and recomputes, while b is still in storage.
func TestStorageFull(t *testing.T) {
	w := stWorker(t, 7000, StorageConfig{Prefetch: PrefetchWaitComplete})
	a, now := pastHost(t, w)
	if w.StorageCapacity() != 7000 || w.StorageUsed() > 7000 || w.stats.StorageEvictedTokens < 2048 {
		t.Fatalf("storage capacity %d, used %d, evicted %d; want 7000, within it, a's 2048 evicted", w.StorageCapacity(), w.StorageUsed(), w.stats.StorageEvictedTokens)
	}
	if got := w.host.store.tree.Match(chain(2, 188), 8).Tokens; got != 3000 {
		t.Fatalf("storage holds %d of b's 3000 tokens", got)
	}
	r, _ := turn(t, w, now+1, 5, "a", a, 2064, 1)
	if r.CachedTokens != 0 || w.stats.StoragePrefetches != 0 {
		t.Fatalf("a: cached %d, %d prefetches; want a recompute", r.CachedTokens, w.stats.StoragePrefetches)
	}
	checkStorage(t, w)
}

func TestStorageConfigErrors(t *testing.T) {
	p := testProfile(t)
	for _, tc := range []struct {
		sc   StorageConfig
		want string
	}{
		{StorageConfig{Enabled: true, Backend: "mooncake", SizeBytes: 6144 * p.Model.KVBytesPerToken()}, "more than the host pool's 6144"},
		{StorageConfig{Enabled: true, Backend: "nfs", SizeBytes: 1 << 40}, `storage backend "nfs"`},
	} {
		_, err := New(Config{Name: "w", Profile: p, BlockSize: 16, PoolTokens: 4096, PrefixCache: true,
			HiCache: HiCacheConfig{Enabled: true, Ratio: 1.5, Storage: tc.sc}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%+v: error %v, want one saying %q", tc.sc, err, tc.want)
		}
	}
	if _, err := ParsePrefetchPolicy("eager"); err == nil || !strings.Contains(err.Error(), "best_effort, wait_complete, timeout") {
		t.Fatalf("ParsePrefetchPolicy(eager): %v", err)
	}
}

// TestStorageProperty is TestHiCacheProperty with a storage tier under a
// small host pool, under each prefetch policy (timeouts short enough to
// cut prefetches): every pool stays within its capacity, no host or
// storage path stays locked once nothing is loading, every request ends,
// and prefetches happen.
func TestStorageProperty(t *testing.T) {
	p := testProfile(t)
	var prefetches int64
	for seed := uint64(1); seed <= 9; seed++ {
		rng := rand.New(rand.NewPCG(seed, 11))
		pool := 3000 + int64(rng.IntN(3000))
		sc := StorageConfig{Enabled: true, Backend: "hf3fs", SizeBytes: (pool*2 + int64(rng.IntN(8000))) * p.Model.KVBytesPerToken(),
			Prefetch: PrefetchPolicy(seed % 3), ThresholdTokens: 16, TimeoutBaseS: 0.001, TimeoutPerKiS: 0.002}
		w, err := New(Config{Name: "w", Profile: p, BlockSize: 16, PoolTokens: pool,
			ChunkTokens: 512, MaxRunning: 1 + rng.IntN(6), PrefixCache: true, MixedChunk: seed%2 == 0,
			HiCache: HiCacheConfig{Enabled: true, Ratio: 1.1 + rng.Float64()*0.5, WritePolicy: WritePolicy(seed % 3), Storage: sc}})
		if err != nil {
			t.Fatal(err)
		}
		live := playTierLoad(t, w, rng, 12, func() {
			if w.HostUsed() > w.HostCapacity() || w.StorageUsed() > w.StorageCapacity() {
				t.Fatalf("seed %d: host holds %d of %d, storage %d of %d", seed, w.HostUsed(), w.HostCapacity(), w.StorageUsed(), w.StorageCapacity())
			}
		})
		checkPool(t, w)
		checkHost(t, w)
		checkStorage(t, w)
		for _, r := range live {
			if r.Stage != StageDone && r.Stage != StageAborted {
				t.Fatalf("seed %d: request %d left in stage %d", seed, r.ID, r.Stage)
			}
		}
		if w.stats.StorageWrittenTokens == 0 {
			t.Fatalf("seed %d: nothing was ever written to storage", seed)
		}
		prefetches += w.stats.StoragePrefetches
	}
	if prefetches == 0 {
		t.Fatal("no request ever prefetched from storage: the property test exercises no prefetch")
	}
	t.Logf("%d prefetches over 9 seeds", prefetches)
}

// A prefetch checked twice (an admission that failed and is retried)
// counts its pages from where it began: at 2 ms after arrival (2 − 0.1) ms
// × 37.5 GB/s = 724 tokens have come, 45 whole pages (720 tokens) go to
// host; at 4 ms 1,487 have, 92 pages (1,472 tokens), not 720 + 1,487.
func TestStoragePrefetchRetried(t *testing.T) {
	w := stWorker(t, 20000, StorageConfig{Prefetch: PrefetchBestEffort})
	a, now := pastHost(t, w)
	r := &Request{ID: 5, Kind: Full, Session: "a", Blocks: a, Input: 2064, Output: 1, SubmittedAt: now + 1}
	for _, c := range []struct {
		at   float64
		host int
	}{{0.002, 720}, {0.004, 1472}} {
		w.stPrefetch(now+1+c.at, r, 0)
		if got := w.HostPrefixMatch(a, 2064); got != c.host {
			t.Fatalf("%.0f ms after arrival host holds %d of a's tokens, want %d", c.at*1e3, got, c.host)
		}
	}
	if w.stats.StoragePrefetchedTokens != 1472 {
		t.Fatalf("prefetched %d tokens in all, want 1472", w.stats.StoragePrefetchedTokens)
	}
	checkHost(t, w)
	checkStorage(t, w)
}

// Two workers given one StoragePool share it: what the first wrote to
// storage (its session a, pushed out of its HBM and host) the second, which
// never saw a, prefetches and loads instead of computing; with a pool each
// the second computes a.
func TestStorageSharedPool(t *testing.T) {
	p := testProfile(t)
	mk := func(name string, pool *StoragePool) *Worker {
		w, err := New(Config{Name: name, Profile: p, BlockSize: 16, PoolTokens: 4096, ChunkTokens: 8192, PrefixCache: true,
			HiCache: HiCacheConfig{Enabled: true, Ratio: 1.5, Storage: StorageConfig{Enabled: true, Backend: "mooncake",
				SizeBytes: 20000 * p.Model.KVBytesPerToken(), Prefetch: PrefetchWaitComplete, Pool: pool}}})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	for _, shared := range []bool{false, true} {
		var pool *StoragePool
		if shared {
			pool = NewStoragePool()
		}
		w1, w2 := mk("w1", pool), mk("w2", pool)
		a, now := pastHost(t, w1)
		r, _ := turn(t, w2, now+1, 5, "a", a, 2064, 1)
		want := 0
		if shared {
			want = 2048
		}
		if r.CachedTokens != want || w2.stats.StoragePrefetchedTokens != int64(want) {
			t.Fatalf("shared %v: w2 found %d tokens cached (%d prefetched), want %d", shared, r.CachedTokens, w2.stats.StoragePrefetchedTokens, want)
		}
		if got := w1.host.store.tree == w2.host.store.tree; got != shared {
			t.Fatalf("shared %v: one pool %v", shared, got)
		}
	}
}
