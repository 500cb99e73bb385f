package engine

import (
	"math"
	"testing"
)

// The storage tier's rules pinned on hand-computed figures (the mutation
// round of docs/mutation.md). Every figure is worked out from stWorker's
// numbers: 16-token blocks, a 6,144-token host pool, Qwen3-30B-A3B's
// 98,304 KV bytes per token, the Mooncake link's 37.5 GB/s + 100 µs.

// A storage pool given no size is DefaultStorageRatio (4) host pools:
// 4 × 6,144 = 24,576 tokens; thresholds and timeouts left at zero take
// SGLang's defaults (256 tokens, 1 s, 0.25 s per 1,024 tokens), and ones
// given are kept.
func TestMutStorageDefaults(t *testing.T) {
	p := testProfile(t)
	mk := func(sc StorageConfig) *storageTier {
		t.Helper()
		sc.Enabled, sc.Backend = true, "mooncake"
		w, err := New(Config{Name: "w", Profile: p, BlockSize: 16, PoolTokens: 4096, PrefixCache: true,
			HiCache: HiCacheConfig{Enabled: true, Ratio: 1.5, Storage: sc}})
		if err != nil {
			t.Fatal(err)
		}
		return w.host.store
	}
	st := mk(StorageConfig{})
	if st.capacity != 24576 {
		t.Fatalf("unsized storage pool holds %d tokens, want 4 × 6144 = 24576", st.capacity)
	}
	if st.threshold != 256 || st.baseS != 1.0 || st.perKiS != 0.25 {
		t.Fatalf("defaults: threshold %d, base %v s, per Ki %v s; want 256, 1, 0.25", st.threshold, st.baseS, st.perKiS)
	}
	st = mk(StorageConfig{ThresholdTokens: 32, TimeoutBaseS: 0.5, TimeoutPerKiS: 0.125})
	if st.threshold != 32 || st.baseS != 0.5 || st.perKiS != 0.125 {
		t.Fatalf("given: threshold %d, base %v s, per Ki %v s; want 32, 0.5, 0.125", st.threshold, st.baseS, st.perKiS)
	}
}

func TestMutPrefetchPolicyNames(t *testing.T) {
	for p, want := range map[PrefetchPolicy]string{
		PrefetchBestEffort: "best_effort", PrefetchWaitComplete: "wait_complete", PrefetchTimeout: "timeout",
		PrefetchPolicy(3): "unknown", PrefetchPolicy(255): "unknown",
	} {
		if got := p.String(); got != want {
			t.Fatalf("PrefetchPolicy(%d) is %q, want %q", p, got, want)
		}
		if want == "unknown" {
			continue
		}
		if back, err := ParsePrefetchPolicy(want); err != nil || back != p {
			t.Fatalf("ParsePrefetchPolicy(%q) = %d, %v; want %d", want, back, err, p)
		}
	}
}

// StorageUsed and StorageCapacity are 0 without a host tier or without a
// storage tier, and what the pool holds with one: a written path of 3
// blocks, the last of 5 tokens, is 16 + 16 + 5 = 37 tokens.
func TestMutStorageUsed(t *testing.T) {
	for _, w := range []*Worker{hiWorker(t, 4096, 0, WriteThrough), hiWorker(t, 4096, 1.5, WriteThrough)} {
		if w.StorageUsed() != 0 || w.StorageCapacity() != 0 {
			t.Fatalf("host tier %v: storage used %d, capacity %d; want 0, 0", w.host != nil, w.StorageUsed(), w.StorageCapacity())
		}
	}
	w := stWorker(t, 7000, StorageConfig{})
	w.stWrite(0, chain(1, 3), 5)
	if w.StorageUsed() != 37 || w.StorageCapacity() != 7000 {
		t.Fatalf("storage used %d of %d, want 37 of 7000", w.StorageUsed(), w.StorageCapacity())
	}
}

// stWrite makes room by storage's LRU only when the new tokens exceed
// what is free, and skips a write that still does not fit. A 7,000-token
// pool holds X (100 blocks, 1,600 tokens, written first) and Y (300
// blocks, 4,800 tokens): 600 free.
func TestMutStorageWriteRoom(t *testing.T) {
	const capTok = 7000
	x, y := chain(1, 450), chain(2, 300)
	setup := func() *Worker {
		w := stWorker(t, capTok, StorageConfig{})
		w.stWrite(0, x[:100], 16)
		w.stWrite(1, y, 16)
		if w.StorageUsed() != 6400 {
			t.Fatalf("X and Y hold %d tokens, want 1600 + 4800 = 6400", w.StorageUsed())
		}
		return w
	}
	for _, tc := range []struct {
		name                 string
		blocks               []uint64
		last                 int64
		used, evicted, skips int64
		xTokens, yTokens     int64
	}{
		// X grown to 137 blocks (2,192 tokens): 592 new tokens, of the
		// 600 free, so nothing is evicted: 6,400 + 592 = 6,992 held.
		{"grows within the free room", x[:137], 16, 6992, 0, 0, 2192, 4800},
		// A new path Z of 137 full blocks and 8 tokens: 2,192 + 8 = 2,200
		// tokens, 1,600 more than the 600 free: evicting the oldest leaf X
		// (1,600) leaves exactly 600 + 1,600 = 2,200 free, so Z fits:
		// 4,800 + 2,200 = 7,000 held.
		{"fits exactly after eviction", chain(5, 138), 8, 7000, 1600, 0, 0, 4800},
		// X grown to 450 blocks (7,200 tokens) needs 7,200 − 1,600 = 5,600
		// of 600 free; X's own 1,600 stay locked, Y's 4,800 go, and 5,400
		// free is still short of 5,600: skipped, X alone (1,600) is left.
		{"does not fit with its prefix locked", x, 16, 1600, 4800, 1, 1600, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := setup()
			w.stWrite(2, tc.blocks, tc.last)
			st := w.host.store
			if w.StorageUsed() != tc.used || w.stats.StorageEvictedTokens != tc.evicted || w.stats.StorageWriteSkips != tc.skips {
				t.Fatalf("used %d, evicted %d, skips %d; want %d, %d, %d",
					w.StorageUsed(), w.stats.StorageEvictedTokens, w.stats.StorageWriteSkips, tc.used, tc.evicted, tc.skips)
			}
			if gx, gy := st.tree.Match(x, 16).Tokens, st.tree.Match(y, 16).Tokens; gx != tc.xTokens || gy != tc.yTokens {
				t.Fatalf("storage holds %d of X, %d of Y; want %d, %d", gx, gy, tc.xTokens, tc.yTokens)
			}
			checkStorage(t, w)
		})
	}
}

// stPrefetch's threshold, its last-token cap and the pages it waits for.
// Storage alone holds a's first 128 blocks (2,048 tokens); HBM's cached
// tokens (the cached argument) and host hold none of them unless given.
// A prompt tried the instant it arrives under wait_complete waits in the
// queue for the whole prefetch, 100 µs + tokens × 98,304 B / 37.5 GB/s,
// then is admitted with no wait left in its step.
func TestMutStoragePrefetchAmount(t *testing.T) {
	a := chain(1, 129)
	wait := func(tokens float64) float64 { return 100e-6 + tokens*98304/37.5e9 }
	for _, tc := range []struct {
		name       string
		blocks     []uint64
		input      int
		cached     int
		prefetches int64
		prefetched int64
		host       int // host's match of the prompt afterwards
		waitS      float64
	}{
		// 2,064 tokens, 1,793 cached: 2,048 − 1,793 = 255 beyond, under 256.
		{"255 beyond", a, 2064, 1793, 0, 0, 0, 0},
		// 1,792 cached: exactly 256 beyond, prefetched: the link carries
		// those 256 (100 µs + 25.17 MB / 37.5 GB/s = 0.7711 ms), and host
		// takes storage's whole 2,048-token path.
		{"256 beyond", a, 2064, 1792, 1, 256, 2048, wait(256)},
		// A 2,048-token prompt storage holds whole: its last token is
		// computed, so 2,047 count; 1,792 cached leaves 255, under 256.
		{"whole prompt, 255 beyond", a[:128], 2048, 1792, 0, 0, 0, 0},
		// Nothing cached: the prefetch carries 2,047 tokens (100 µs +
		// 201.23 MB / 37.5 GB/s = 5.4661 ms) and files all 128 pages.
		{"whole prompt", a[:128], 2048, 0, 1, 2048, 2048, wait(2047)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := stWorker(t, 20000, StorageConfig{Prefetch: PrefetchWaitComplete})
			if w.mdl.KVBytesPerToken() != 98304 {
				t.Fatalf("KV bytes per token %d, the figures assume 98304", w.mdl.KVBytesPerToken())
			}
			w.stWrite(0, a[:128], 16)
			r := &Request{ID: 1, Kind: Full, Session: "a", Blocks: tc.blocks, Input: tc.input, Output: 1, SubmittedAt: 1}
			w.stPrefetch(1, r, tc.cached)
			if r.isParked() != (tc.waitS > 0) {
				t.Fatalf("parked %v, want %v: it waits in the queue for its prefetch", r.isParked(), tc.waitS > 0)
			}
			if r.isParked() {
				at := r.rare.parkedUntil
				if math.Abs(at-1-tc.waitS) > 1e-12 {
					t.Fatalf("parked until %v, want 1 + %v", at, tc.waitS)
				}
				w.unpark(at)
				w.stPrefetch(at, r, tc.cached) // admitted when it is done: no wait left
			}
			if w.stats.StoragePrefetches != tc.prefetches || w.stats.StoragePrefetchedTokens != tc.prefetched {
				t.Fatalf("%d prefetches of %d tokens, want %d of %d",
					w.stats.StoragePrefetches, w.stats.StoragePrefetchedTokens, tc.prefetches, tc.prefetched)
			}
			if got := w.HostPrefixMatch(tc.blocks, tc.input); got != tc.host {
				t.Fatalf("host holds %d tokens of the prompt, want %d", got, tc.host)
			}
			if math.Abs(w.stats.StorageWaitS-tc.waitS) > 1e-12 {
				t.Fatalf("waited %v s, want %v", w.stats.StorageWaitS, tc.waitS)
			}
			checkHost(t, w)
			checkStorage(t, w)
		})
	}
}
