package engine

import (
	"strings"
	"testing"

	"github.com/pdhybrid/pdhybrid/internal/model"
)

// sharedDecoders are two storageDecoder-like decoders over one shared
// storage pool (wait_complete): the second reads it over link when link's
// bandwidth is > 0 (else the Mooncake link, as the first).
func sharedDecoders(t *testing.T, pool *StoragePool, link model.Link) (d1, d2 *Worker) {
	t.Helper()
	mk := func(name string, l model.Link) *Worker {
		w, err := New(Config{Name: name, Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: 4000,
			Session: SessionConfig{Enabled: true, Eviction: EvictSession},
			HiCache: HiCacheConfig{Enabled: true, Ratio: 3, WritePolicy: WriteThrough,
				Storage: StorageConfig{Enabled: true, Backend: "mooncake", Prefetch: PrefetchWaitComplete, Pool: pool, Link: l}}})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	return mk("d1", model.Link{}), mk("d2", link)
}

// A partial host + storage hit is answered with both parts, tier storage
// (the lowest tier the turn reads from). a's 1,280 tokens were seeded on
// storageDecoder, trimmed to host (written on to storage), then the host
// pool dropped it and took back its first 640: HBM holds none of a, host 640, storage all 1,280. A 1,344-token
// turn appends 64 after 640 to load back and 1,280 − 640 = 640 to
// prefetch (over the 256-token threshold): cached 1,280. Before, the
// answer said host with 640 and counted the storage part as computed.
// Run as the answer says: computed 64, prefetched 640 then loaded 1,280.
func TestAdmitHostAndStorageParts(t *testing.T) {
	w, a, now := storageDecoder(t)
	// storageDecoder emptied host; write a's first half back.
	w.hiWrite(now, a[:10], 64)
	if h := w.HostPrefixMatch(a[:20], 1280); h != 640 {
		t.Fatalf("precondition: host holds %d of a, want 640", h)
	}
	q := AdmitQuery{Session: "a", Blocks: a[:21], Input: 1344, Output: 4}
	if res, cached, tier := w.SessionTier(now, q); !res || cached != 1280 || tier != TierStorage {
		t.Fatalf("residency %v, %d cached, tier %s; want resident, 1280, storage", res, cached, tier)
	}
	rep := w.AdmitSession(now, q)
	if !rep.CanAdmit || rep.Mode != AdmitDirect || rep.Tier != TierStorage || rep.HostTokens != 640 || rep.StorageTokens != 640 || rep.CachedTokens != 1280 {
		t.Fatalf("%+v; want direct, tier storage, 640 host + 640 storage of 1280 cached", rep)
	}
	// A seed answer (τ_append under the append) names both parts too.
	q.MaxAppend = 63
	if rep := w.AdmitSession(now, q); rep.Mode != AdmitSeed || rep.Tier != TierStorage || rep.HostTokens != 640 || rep.StorageTokens != 640 || rep.CachedTokens != 1280 {
		t.Fatalf("seed answer %+v; want tier storage, 640 + 640 of 1280", rep)
	}
	prefilled := w.stats.PrefillTokens
	r, _ := turn(t, w, now+1, 7, "a", a[:21], 1344, 1)
	if r.CachedTokens != 1280 || w.stats.PrefillTokens-prefilled != 64 || w.stats.StoragePrefetchedTokens != 640 {
		t.Fatalf("cached %d, computed %d, prefetched %d; want 1280, 64, 640", r.CachedTokens, w.stats.PrefillTokens-prefilled, w.stats.StoragePrefetchedTokens)
	}
}

// A shared pool's hit on a decoder that never held the session is priced:
// d2's seed answer for a (1,344 tokens; d1 left a's 1,280 in the shared
// storage only) names 1,280 storage tokens, tier storage, so a local seed
// there is costed as a prefetch over d2's own link. d2 is not resident for
// a residency probe (it never held a), and a pool of its own holds nothing
// of a. d2's own link is 12.5 GB/s + 1 ms: its prefetch waits
// 1,280 × 98,304 B = 125.8 MB ÷ 12.5 GB/s + 1 ms = 11.066 ms, not d1's
// Mooncake 3.455 ms (the shared tier used to read over the first worker's
// link).
func TestSharedStorageNeverHeldPriced(t *testing.T) {
	slow := model.Link{Name: "slow", BandwidthBytes: 12.5e9, SetupS: 1e-3}
	for _, shared := range []bool{false, true} {
		var pool *StoragePool
		if shared {
			pool = NewStoragePool()
		}
		d1, d2 := sharedDecoders(t, pool, slow)
		a := chain(1, 30)
		now := seedOn(t, d1, 0, "a", a[:20], 1280, 1)
		var trim AdmitReply
		if !d1.trimOne(now, "", &trim) {
			t.Fatal("precondition: a not trimmed")
		}
		d1.host.tree.Evict(d1.host.tree.Tokens())
		q := AdmitQuery{Session: "a", Blocks: a[:21], Input: 1344, Output: 4}
		if res, _, tier := d2.SessionTier(now, q); res || tier != TierNone {
			t.Fatalf("shared %v: d2 resident %v, tier %s; want not resident (it never held a)", shared, res, tier)
		}
		rep := d2.AdmitSession(now, q)
		want := map[bool]int{false: 0, true: 1280}[shared]
		wantTier := map[bool]string{false: TierNone, true: TierStorage}[shared]
		if !rep.CanAdmit || rep.Mode != AdmitSeed || rep.StorageTokens != want || rep.CachedTokens != want || rep.Tier != wantTier {
			t.Fatalf("shared %v: d2 answered %+v; want a seed naming %d storage tokens, tier %s", shared, rep, want, wantTier)
		}
		if !shared {
			continue
		}
		r, _ := turn(t, d2, now+1, 9, "a", a[:21], 1344, 1)
		wait := 1e-3 + float64(1280*98304)/12.5e9
		if r.CachedTokens != 1280 || !near(d2.stats.StorageWaitS, wait) {
			t.Fatalf("d2 cached %d, waited %v s for storage; want 1280 over its own link, %v s", r.CachedTokens, d2.stats.StorageWaitS, wait)
		}
	}
}

// The shared pool's aggregate bandwidth is shared by concurrent
// prefetches, first booked first served. pastHost leaves a's 2,048 tokens
// in w1's storage only; w1 and then w2 each run a's 2,064-token turn
// arriving at the same instant (wait_complete). w1 prefetches 2,048 tokens
// (201.3 MB); its turn wrote its whole prompt on to the pool, so w2
// prefetches 2,063 (all but the last token: 202.8 MB). Each worker's own
// Mooncake link: 201.3 MB ÷ 37.5 GB/s + 0.1 ms = 5.469 ms and 5.508 ms.
// At an aggregate 12.5 GB/s the pool carries w1's in 16.106 ms, which
// arrives at 16.106 + 0.1 = 16.206 ms, and w2's after it, at
// (201.3 + 202.8) MB ÷ 12.5 GB/s + 0.1 ms = 32.430 ms. Unlimited (0, the
// default): each its own link's time, as before; at 100 GB/s, above one
// worker's link, the same.
func TestSharedStorageAggregateBandwidth(t *testing.T) {
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
	x1, x2 := float64(2048*98304), float64(2063*98304)
	for _, c := range []struct {
		name     string
		bw       float64
		w1S, w2S float64
	}{
		{"unlimited", 0, 1e-4 + x1/37.5e9, 1e-4 + x2/37.5e9},
		{"12.5 GB/s", 12.5e9, x1/12.5e9 + 1e-4, (x1+x2)/12.5e9 + 1e-4},
		// Above one worker's link: its own binds ((201.3 + 202.8) MB ÷
		// 100 GB/s + 0.1 ms = 4.141 ms < 5.508 ms).
		{"100 GB/s", 100e9, 1e-4 + x1/37.5e9, 1e-4 + x2/37.5e9},
	} {
		pool := NewStoragePool()
		pool.BandwidthBytes = c.bw
		w1, w2 := mk("w1", pool), mk("w2", pool)
		a, now := pastHost(t, w1)
		start := now + 1
		turn(t, w1, start, 5, "a", a, 2064, 1)
		turn(t, w2, start, 5, "a", a, 2064, 1)
		if w1.stats.StoragePrefetchedTokens != 2048 || w2.stats.StoragePrefetchedTokens != 2064 {
			t.Fatalf("%s: prefetched %d and %d tokens, want 2048 and 2064 (whole pages)", c.name, w1.stats.StoragePrefetchedTokens, w2.stats.StoragePrefetchedTokens)
		}
		if !near(w1.stats.StorageWaitS, c.w1S) || !near(w2.stats.StorageWaitS, c.w2S) {
			t.Fatalf("%s: w1 waited %.6f s, w2 %.6f s; want %.6f and %.6f", c.name, w1.stats.StorageWaitS, w2.stats.StorageWaitS, c.w1S, c.w2S)
		}
	}
	pool := NewStoragePool()
	pool.BandwidthBytes = -1
	if _, err := New(Config{Name: "w", Profile: p, BlockSize: 16, PoolTokens: 4096, PrefixCache: true,
		HiCache: HiCacheConfig{Enabled: true, Ratio: 1.5, Storage: StorageConfig{Enabled: true, Backend: "mooncake", Pool: pool}}}); err == nil {
		t.Fatal("a negative aggregate bandwidth was accepted")
	}
}

// A session HBM evicts that the host tier no longer holds but storage does
// is reported Stored, not Demoted: the router keeps it pinned at the
// storage tier (kvc.SessionStored). a's 1,280 tokens were seeded (written
// through to host and on to storage), the host pool then dropped them;
// the trim that takes a from HBM finds host without it, storage with it.
// With storage holding nothing either, the eviction is a plain one.
func TestEvictionReportsStored(t *testing.T) {
	for _, keep := range []bool{true, false} {
		w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: 4000,
			Session: SessionConfig{Enabled: true, Eviction: EvictSession},
			HiCache: HiCacheConfig{Enabled: true, Ratio: 3, WritePolicy: WriteThrough,
				Storage: StorageConfig{Enabled: true, Backend: "mooncake", Prefetch: PrefetchWaitComplete}}})
		if err != nil {
			t.Fatal(err)
		}
		a := chain(1, 30)
		now := seedOn(t, w, 0, "a", a[:20], 1280, 1)
		w.host.tree.Evict(w.host.tree.Tokens())
		if !keep {
			w.host.store.tree.Evict(w.host.store.tree.Tokens())
		}
		w.TakeEvents()
		var rep AdmitReply
		if !w.trimOne(now, "", &rep) {
			t.Fatal("precondition: a not trimmed")
		}
		var got []Event
		for _, ev := range w.TakeEvents() {
			if ev.Kind == EvSessionEvicted {
				got = append(got, ev)
			}
		}
		if len(got) != 1 || got[0].Session != "a" || got[0].Demoted || got[0].Stored != keep {
			t.Fatalf("storage keeps a: %v; eviction events %+v, want one for a, Stored %v, not Demoted", keep, got, keep)
		}
	}
}

// What of a prefetch has arrived by a given time, by hand (the Mooncake
// link: 37.5 GB/s after 0.1 ms of setup, 98,304 B a token): 1 ms after the
// setup 37.5 MB, 381.47 tokens, 381 whole; 0.05 ms before the setup ends
// −19.07, −19 (the caller reads a negative count as no page). Booked on an
// aggregate link that delivers the last of 2,048 tokens at 16.206 ms, the
// pages arrive evenly after the setup: at 8.154 ms, 8.054 / 16.106 of
// them, 1,024.13: 1,024.
func TestStorageArrivedTokens(t *testing.T) {
	st := &storageTier{link: model.Link{BandwidthBytes: 37.5e9, SetupS: 1e-4}}
	for _, c := range []struct {
		name        string
		end, doneAt float64
		booked      bool
		want        int64
	}{
		{"own link, 1 ms after setup", 10 + 1.1e-3, 0, false, 381},
		{"own link, before setup", 10 + 0.5e-4, 0, false, -19},
		{"booked, halfway", 10 + 8.154e-3, 10 + 16.206e-3, true, 1024},
		{"booked, at its end", 10 + 16.206e-3, 10 + 16.206e-3, true, 2048},
	} {
		if got := st.arrivedTokens(2048, 10, c.end, c.doneAt, c.booked, 98304); got != c.want {
			t.Errorf("%s: %d tokens arrived, want %d", c.name, got, c.want)
		}
	}
}

// A pool's index refuses a worker of another block size, and so does
// the engine that would join it.
func TestStorageIndexBlockSize(t *testing.T) {
	idx := NewStorageIndex(64, 10000)
	if c, err := idx.Open(64, 5); err != nil || c != 10000 {
		t.Fatalf("open of 64-token blocks: %d, %v; want the pool's 10,000", c, err)
	}
	if _, err := idx.Open(16, 5); err == nil {
		t.Fatal("a worker of 16-token blocks joined a pool of 64")
	}
	_, err := New(Config{Name: "w", Profile: testProfile(t), BlockSize: 16, PoolTokens: 4096, PrefixCache: true,
		HiCache: HiCacheConfig{Enabled: true, Ratio: 1.5, Storage: StorageConfig{Enabled: true, Backend: "mooncake", Index: idx}}})
	if err == nil || !strings.Contains(err.Error(), "16") {
		t.Fatalf("engine over a pool of another block size: %v, want an error naming it", err)
	}
}
