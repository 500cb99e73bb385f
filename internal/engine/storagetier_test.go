package engine

import "testing"

// storageDecoder is hostDecoder's decoder with a storage tier below its
// host tier (Mooncake, wait_complete): session a's 1,280 tokens were
// seeded, trimmed from HBM to host (written on to storage), and then the
// host pool dropped them: only storage holds a.
func storageDecoder(t *testing.T) (*Worker, []uint64, float64) {
	t.Helper()
	w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: 4000,
		Session: SessionConfig{Enabled: true, Eviction: EvictSession},
		HiCache: HiCacheConfig{Enabled: true, Ratio: 3, WritePolicy: WriteThrough,
			Storage: StorageConfig{Enabled: true, Backend: "mooncake", Prefetch: PrefetchWaitComplete}}})
	if err != nil {
		t.Fatal(err)
	}
	a := chain(1, 30)
	now := seedOn(t, w, 0, "a", a[:20], 1280, 1)
	var rep AdmitReply
	if !w.trimOne(now, "", &rep) {
		t.Fatal("precondition: a not trimmed")
	}
	w.host.tree.Evict(w.host.tree.Tokens())
	if w.PrefixMatch(a, 1280) != 0 || w.HostPrefixMatch(a, 1280) != 0 || w.host.store.tree.Match(a[:20], 64).Tokens != 1280 {
		t.Fatalf("precondition: HBM holds %d, host %d, storage %d of a; want 0, 0, 1280",
			w.PrefixMatch(a, 1280), w.HostPrefixMatch(a, 1280), w.host.store.tree.Match(a[:20], 64).Tokens)
	}
	return w, a, now
}

// Admission and residency from the storage tier, by hand (a's 1,280
// tokens in storage only, 4 output tokens; storage's prefetch threshold is
// SGLang's 256):
//   - a 1,344-token turn appends 1,344 − 1,280 = 64: direct at τ_append 64
//     with 1,280 storage tokens, tier storage; at τ 63 a seed naming them;
//   - a 257-token turn would prefetch min(1,280, 256) = 256, at the
//     threshold: direct, 256 from storage; a 256-token one 255, under it:
//     a seed, tier none;
//   - a session with no record here (z) is not admitted from storage.
func TestAdmitFromStorageByHand(t *testing.T) {
	for _, c := range []struct {
		name       string
		sess       string
		input, tau int
		direct     bool
		storage    int
		tier       string
	}{
		{"append 64 at τ 64", "a", 1344, 64, true, 1280, TierStorage},
		{"append 64 at τ 63", "a", 1344, 63, false, 1280, TierStorage},
		{"257 tokens", "a", 257, 0, true, 256, TierStorage},
		{"256 tokens", "a", 256, 0, false, 0, TierNone},
		{"no record", "z", 1344, 0, false, 0, TierNone},
	} {
		w, a, now := storageDecoder(t)
		n := (c.input + 63) / 64
		q := AdmitQuery{Session: c.sess, Blocks: a[:n], Input: c.input, Output: 4, MaxAppend: c.tau}
		res, cached, tier := w.SessionTier(now, q)
		if res != (c.tier == TierStorage) || cached != c.storage || tier != c.tier {
			t.Fatalf("%s: residency %v, %d cached, tier %s; want %v, %d, %s", c.name, res, cached, tier, c.tier == TierStorage, c.storage, c.tier)
		}
		rep := w.AdmitSession(now, q)
		mode := map[bool]AdmitMode{true: AdmitDirect, false: AdmitSeed}[c.direct]
		if !rep.CanAdmit || rep.Mode != mode || rep.StorageTokens != c.storage || rep.HostTokens != 0 || rep.CachedTokens != c.storage || rep.Tier != c.tier {
			t.Fatalf("%s: %+v; want %v with %d storage tokens, tier %s", c.name, rep, mode, c.storage, c.tier)
		}
	}
}

// The storage-tier direct append runs as the engine charges it: the turn
// waits for the 1,280 tokens' prefetch over the Mooncake link, loads them
// back over PCIe beside its 64-token prefill, and computes only the 64.
func TestStorageDirectAppendPrefetches(t *testing.T) {
	w, a, now := storageDecoder(t)
	rep := w.AdmitSession(now+1, AdmitQuery{Session: "a", Blocks: a[:21], Input: 1344, Output: 1})
	if rep.Mode != AdmitDirect || rep.Tier != TierStorage {
		t.Fatalf("%+v, want a direct append from storage", rep)
	}
	prefilled := w.stats.PrefillTokens
	r, _ := turn(t, w, now+1, 7, "a", a[:21], 1344, 1)
	if r.CachedTokens != 1280 || w.stats.PrefillTokens-prefilled != 64 || w.stats.StoragePrefetchedTokens != 1280 {
		t.Fatalf("cached %d, computed %d, prefetched %d; want 1280, 64, 1280", r.CachedTokens, w.stats.PrefillTokens-prefilled, w.stats.StoragePrefetchedTokens)
	}
}
