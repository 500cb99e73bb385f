package engine

import (
	"fmt"
	"strings"
	"testing"
)

// Each policy prints as SGLang's flag spells it; a value past the list is
// "unknown".
func TestWritePolicyString(t *testing.T) {
	for p, want := range map[WritePolicy]string{WriteThrough: "write_through", WriteThroughSelective: "write_through_selective",
		WriteBack: "write_back", WritePolicy(3): "unknown", WritePolicy(200): "unknown"} {
		if got := p.String(); got != want {
			t.Fatalf("WritePolicy(%d) = %q, want %q", p, got, want)
		}
	}
}

// --hicache-size must hold MORE tokens than the HBM pool: exactly the
// pool's 4,096 tokens is refused, one token more is taken (4,097).
func TestHiCacheSizeMustExceedPool(t *testing.T) {
	kvb := testProfile(t).Model.KVBytesPerToken()
	mk := func(size int64) (*Worker, error) {
		return New(Config{Name: "w", Profile: testProfile(t), BlockSize: 16, PoolTokens: 4096, PrefixCache: true,
			HiCache: HiCacheConfig{Enabled: true, SizeBytes: size}})
	}
	if _, err := mk(4096 * kvb); err == nil || !strings.Contains(err.Error(), "--hicache-size") {
		t.Fatalf("host pool of exactly 4,096 tokens: error %v, want one naming --hicache-size", err)
	}
	w, err := mk(4097 * kvb)
	if err != nil || w.HostCapacity() != 4097 {
		t.Fatalf("host pool of 4,097 tokens: %v, capacity %d", err, w.HostCapacity())
	}
}

// hiWrite makes room for what host lacks of the path, no more: a host pool
// of 2 × 1,024 = 2,048 tokens (16-token blocks) takes a 128-block path of
// 2,048 tokens exactly; after a 64-block prefix (1,024) the same path needs
// 1,024 more and fits exactly too; a 129-block path (2,064) is skipped.
func TestHiWriteNeedsWhatHostLacks(t *testing.T) {
	w := hiWorker(t, 1024, 2, WriteBack)
	w.hiWrite(0, chain(1, 128), 16)
	if w.stats.HostWrittenTokens != 2048 || w.HostUsed() != 2048 || w.stats.HostWriteSkips != 0 {
		t.Fatalf("128 blocks into 2,048 free: wrote %d, host holds %d, %d skips; want 2048, 2048, 0",
			w.stats.HostWrittenTokens, w.HostUsed(), w.stats.HostWriteSkips)
	}

	w = hiWorker(t, 1024, 2, WriteBack)
	w.hiWrite(0, chain(1, 64), 16)
	w.hiWrite(1, chain(1, 128), 16) // needs 128×16 − 1,024 held = 1,024, free 1,024
	if w.stats.HostWrittenTokens != 2048 || w.HostUsed() != 2048 || w.stats.HostWriteSkips != 0 {
		t.Fatalf("extending 1,024 held by 1,024 into 1,024 free: wrote %d, host holds %d, %d skips; want 2048, 2048, 0",
			w.stats.HostWrittenTokens, w.HostUsed(), w.stats.HostWriteSkips)
	}

	w = hiWorker(t, 1024, 2, WriteBack)
	w.hiWrite(0, chain(1, 129), 16)
	if w.stats.HostWrittenTokens != 0 || w.HostUsed() != 0 || w.stats.HostWriteSkips != 1 {
		t.Fatalf("2,064 tokens into 2,048: wrote %d, host holds %d, %d skips; want 0, 0, 1",
			w.stats.HostWrittenTokens, w.HostUsed(), w.stats.HostWriteSkips)
	}
}

// hiDemoteTail skips (and counts) a tail the host pool cannot take, and
// ignores one of no tokens: an earlier host tail of the session stays.
func TestHiDemoteTailSkipsAndEmpty(t *testing.T) {
	w := hiWorker(t, 1024, 2, WriteBack)
	w.hiDemoteTail(&outputTail{session: SessionKey{ID: "a"}, tokens: 3000, at: 1, live: true}) // 3,000 > 2,048
	if w.stats.HostWriteSkips != 1 || w.HostUsed() != 0 || w.host.tails.Len() != 0 {
		t.Fatalf("3,000-token tail into 2,048: %d skips, host holds %d; want 1, 0", w.stats.HostWriteSkips, w.HostUsed())
	}
	w.hiDemoteTail(&outputTail{session: SessionKey{ID: "a"}, tokens: 100, at: 2, live: true})
	w.hiDemoteTail(&outputTail{session: SessionKey{ID: "a"}, tokens: 0, at: 3, live: true})
	if ht := w.hostTail("a"); ht == nil || ht.tokens != 100 || w.HostUsed() != 100 || w.stats.HostWrittenTokens != 100 {
		t.Fatalf("after a 100-token tail and an empty one: host tail %+v, host holds %d, wrote %d; want the 100", ht, w.HostUsed(), w.stats.HostWrittenTokens)
	}
}

// The host pool frees demoted tails and host leaves in one LRU order, a
// tail first only when strictly older: a 100-token tail demoted at t and a
// 1,024-token leaf written at 2; making room for 1,000 (924 free of 2,048)
// takes the tail when t = 1 (100 freed is enough) and the leaf when t = 2.
func TestHiMakeRoomOneLRUOrder(t *testing.T) {
	for _, c := range []struct {
		tailAt   float64
		tailGone bool
	}{{1, true}, {2, false}} {
		w := hiWorker(t, 1024, 2, WriteBack)
		w.hiDemoteTail(&outputTail{session: SessionKey{ID: "s"}, tokens: 100, at: c.tailAt, live: true})
		w.hiWrite(2, chain(1, 64), 16)
		if !w.hiMakeRoom(1000) {
			t.Fatal("hiMakeRoom(1000) failed")
		}
		tailGone := w.hostTail("s") == nil
		leaf := w.HostPrefixMatch(chain(1, 64), 1024)
		if tailGone != c.tailGone || (leaf == 1024) != c.tailGone {
			t.Fatalf("tail at %v, leaf at 2: tail gone %v, host matches %d of the leaf; want tail gone %v", c.tailAt, tailGone, leaf, c.tailGone)
		}
		if want := map[bool]int64{true: 100, false: 1024}[c.tailGone]; w.stats.HostEvictedTokens != want {
			t.Fatalf("tail at %v: host evicted %d, want %d", c.tailAt, w.stats.HostEvictedTokens, want)
		}
	}
}

// Selective write-through copies the blocks a request reuses: all 4 of a
// 56-token prompt (16-token blocks, the last holding 8) are 3×16 + 8 = 56
// tokens; the first 2, whole blocks, 32.
func TestHiReusedWritesTheReusedBlocks(t *testing.T) {
	for _, c := range []struct {
		n    int
		want int64
	}{{4, 56}, {2, 32}, {0, 0}} {
		w := hiWorker(t, 1024, 2, WriteThroughSelective)
		w.hiReused(0, &Request{Blocks: chain(1, 4), Input: 56}, c.n)
		if w.stats.HostWrittenTokens != c.want || w.HostUsed() != c.want {
			t.Fatalf("reusing %d blocks: wrote %d, host holds %d; want %d", c.n, w.stats.HostWrittenTokens, w.HostUsed(), c.want)
		}
	}
}

// Write-back demotes a leaf HBM frees with its last block's own tokens: a
// 40-token prompt of 3 blocks is 16 + 16 + 8, so 40 tokens go to host and
// host then holds the whole path.
func TestHiDemoteWritesPartialLastBlock(t *testing.T) {
	w := hiWorker(t, 1024, 2, WriteBack)
	_, now := turn(t, w, 0, 1, "", chain(1, 3), 40, 1)
	if w.HostUsed() != 0 {
		t.Fatalf("write-back copied %d tokens before any eviction", w.HostUsed())
	}
	n, ok := w.tree.OldestLeaf()
	if !ok {
		t.Fatal("no leaf in HBM")
	}
	if host, _ := w.hiDemote(now, n); !host {
		t.Fatal("hiDemote: host does not hold the whole path")
	}
	if w.stats.HostWrittenTokens != 40 || w.HostUsed() != 40 || w.HostPrefixMatch(chain(1, 3), 40) != 40 {
		t.Fatalf("demoted: wrote %d, host holds %d, matches %d; want 40 each", w.stats.HostWrittenTokens, w.HostUsed(), w.HostPrefixMatch(chain(1, 3), 40))
	}
}

// The order slices of output tails (HBM's and host's) are compacted once
// more than 64 entries and at least half of them are spent: after k of n
// one-token tails are evicted oldest first, the slice's length and head are
// (n, k) while k ≤ 64 or 2k < n, and (n − k, 0) from the first eviction
// that makes k > 64 and 2k ≥ n.
func TestTailOrderCompaction(t *testing.T) {
	cases := []struct{ n, k, wantLen, wantHead int }{
		{4, 2, 4, 2},        // 2k = n but k ≤ 64
		{128, 64, 128, 64},  // k = 64: not more than 64
		{130, 65, 65, 0},    // k = 65 > 64 and 2k = n
		{200, 99, 200, 99},  // 2k = 198 < 200
		{200, 100, 100, 0},  // 2k = 200 = n
		{200, 120, 100, 20}, // compacted at k = 100, then 20 more spent
	}
	for _, c := range cases {
		// HBM's tails (output.go).
		w := hiWorker(t, 100000, 0, WriteThrough)
		for i := 0; i < c.n; i++ {
			tl := &outputTail{session: SessionKey{ID: fmt.Sprint("s", i)}, tokens: 1, at: float64(i), live: true}
			w.tails.Put(tl.session, tl)
			w.tailOrder = append(w.tailOrder, tl)
			w.tailTokens++
		}
		for i := 0; i < c.k; i++ {
			if got := w.evictOldestTail(); got != 1 {
				t.Fatalf("HBM, n %d: eviction %d freed %d, want 1", c.n, i, got)
			}
		}
		if len(w.tailOrder) != c.wantLen || w.tailHead != c.wantHead || w.tailTokens != int64(c.n-c.k) {
			t.Fatalf("HBM, %d of %d evicted: order length %d, head %d, %d tokens; want %d, %d, %d",
				c.k, c.n, len(w.tailOrder), w.tailHead, w.tailTokens, c.wantLen, c.wantHead, c.n-c.k)
		}
		if c.wantHead < len(w.tailOrder) && w.tailOrder[w.tailHead].session.ID != fmt.Sprint("s", c.k) {
			t.Fatalf("HBM: the next tail is %s, want s%d", w.tailOrder[w.tailHead].session.ID, c.k)
		}

		// Host's tails (hicache.go).
		h := hiWorker(t, 100000, 2, WriteBack)
		for i := 0; i < c.n; i++ {
			h.hiDemoteTail(&outputTail{session: SessionKey{ID: fmt.Sprint("s", i)}, tokens: 1, at: float64(i), live: true})
		}
		for i := 0; i < c.k; i++ {
			if got := h.host.evictOldestTail(); got != 1 {
				t.Fatalf("host, n %d: eviction %d freed %d, want 1", c.n, i, got)
			}
		}
		if len(h.host.order) != c.wantLen || h.host.head != c.wantHead || h.HostUsed() != int64(c.n-c.k) {
			t.Fatalf("host, %d of %d evicted: order length %d, head %d, holds %d; want %d, %d, %d",
				c.k, c.n, len(h.host.order), h.host.head, h.HostUsed(), c.wantLen, c.wantHead, c.n-c.k)
		}
		if c.wantHead < len(h.host.order) && h.host.order[h.host.head].session.ID != fmt.Sprint("s", c.k) {
			t.Fatalf("host: the next tail is %s, want s%d", h.host.order[h.host.head].session.ID, c.k)
		}
	}
	// With no tail left either order yields nothing.
	w := hiWorker(t, 1024, 2, WriteBack)
	if got := w.evictOldestTail(); got != 0 {
		t.Fatalf("HBM with no tails freed %d", got)
	}
	if got := w.host.evictOldestTail(); got != 0 {
		t.Fatalf("host with no tails freed %d", got)
	}
}

// A host hit loads all but the prompt's last token, beyond what HBM holds,
// when that is at least SGLang's 10 tokens. An 11-token prompt (one
// partial block) that HBM evicted and host holds loads min(11, 11 − 1) − 0
// = 10 and computes 1; a 10-token one would load 9, under the threshold,
// so it computes all 10.
func TestHiMatchLoadsAllButLastToken(t *testing.T) {
	for _, c := range []struct {
		input, loaded int
	}{{11, 10}, {10, 0}} {
		w := hiWorker(t, 4096, 4, WriteThrough)
		a := chain(1, 1)
		_, now := turn(t, w, 0, 1, "a", a, c.input, 1)
		_, now = turn(t, w, now+1, 2, "b", chain(2, 256), 4090, 1) // evicts a from HBM
		if w.PrefixMatch(a, c.input) != 0 || w.HostPrefixMatch(a, c.input) != c.input {
			t.Fatalf("input %d: HBM holds %d, host %d; want 0 and all", c.input, w.PrefixMatch(a, c.input), w.HostPrefixMatch(a, c.input))
		}
		prefilled := w.stats.PrefillTokens
		r, _ := turn(t, w, now+1, 3, "a", a, c.input, 1)
		if r.CachedTokens != c.loaded || int(w.stats.HostLoadedTokens) != c.loaded || int(w.stats.PrefillTokens-prefilled) != c.input-c.loaded {
			t.Fatalf("input %d: cached %d, loaded %d, computed %d; want %d, %d, %d", c.input, r.CachedTokens, w.stats.HostLoadedTokens,
				w.stats.PrefillTokens-prefilled, c.loaded, c.loaded, c.input-c.loaded)
		}
	}
}

// With HBM still holding part of the prompt, host loads only what lies
// beyond it. Turns of a[:64] (1,024 tokens) and a[:128] (2,048) leave the
// path in HBM and, written through, in host; b's 3,000 tokens evict the
// leaf a[64:128] (1,024) from the 4,096-token HBM pool. A 3,072-token turn
// a[:192] then has 1,024 cached in HBM, loads 2,048 − 1,024 = 1,024 from
// host and computes 3,072 − 2,048 = 1,024.
func TestHiMatchLoadsBeyondHBM(t *testing.T) {
	w := hiWorker(t, 4096, 4, WriteThrough)
	a := chain(1, 192)
	_, now := turn(t, w, 0, 1, "a", a[:64], 1024, 1)
	_, now = turn(t, w, now+1, 2, "a", a[:128], 2048, 1)
	_, now = turn(t, w, now+1, 3, "b", chain(2, 188), 3000, 1)
	if w.PrefixMatch(a, 3072) != 1024 || w.HostPrefixMatch(a, 3072) != 2048 {
		t.Fatalf("precondition: HBM holds %d, host %d of a; want 1024, 2048", w.PrefixMatch(a, 3072), w.HostPrefixMatch(a, 3072))
	}
	prefilled := w.stats.PrefillTokens
	r, _ := turn(t, w, now+1, 4, "a", a, 3072, 1)
	if r.CachedTokens != 2048 || w.stats.HostLoadedTokens != 1024 || w.stats.PrefillTokens-prefilled != 1024 {
		t.Fatalf("cached %d, loaded %d, computed %d; want 2048, 1024, 1024", r.CachedTokens, w.stats.HostLoadedTokens, w.stats.PrefillTokens-prefilled)
	}
}

// hostDecoder is a session decoder (64-token blocks, pool tokens, a
// write-through host tier of 3 × pool) on which session a was seeded with
// a[:20] (1,280 tokens) and then trimmed: HBM holds none of it, host all.
func hostDecoder(t *testing.T, pool int64) (*Worker, []uint64, float64) {
	t.Helper()
	w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: pool,
		Session: SessionConfig{Enabled: true, Eviction: EvictSession},
		HiCache: HiCacheConfig{Enabled: true, Ratio: 3, WritePolicy: WriteThrough}})
	if err != nil {
		t.Fatal(err)
	}
	a := chain(1, 30)
	now := seedOn(t, w, 0, "a", a[:20], 1280, 1)
	var rep AdmitReply
	if !w.trimOne(now, "", &rep) || w.PrefixMatch(a, 1280) != 0 || w.HostPrefixMatch(a, 1280) != 1280 {
		t.Fatalf("precondition: HBM holds %d, host %d of a; want 0, 1280", w.PrefixMatch(a, 1280), w.HostPrefixMatch(a, 1280))
	}
	return w, a, now
}

// Admission from the host tier, by hand (a's 1,280 tokens on host, none in
// HBM, 4 output tokens):
//   - a 1,280-token turn takes min(1,280, 1,279) = 1,279 from host and
//     appends 1; with no τ_append (0) that is direct;
//   - a 1,344-token turn appends 1,344 − 1,280 = 64: direct at τ_append 64,
//     not at 63 (then a seed, host named);
//   - an 11-token turn takes min(11, 10) = 10 from host, the least SGLang
//     loads; a 10-token one would take 9: a seed that loads nothing;
//   - a session with no record here (z) is not admitted from host even
//     though host holds its prompt: at session granularity an evicted
//     session's host copy is known by its record.
func TestAdmitFromHostByHand(t *testing.T) {
	w, a, now := hostDecoder(t, 4000)
	for _, c := range []struct {
		name       string
		sess       string
		input, tau int
		direct     bool
		host       int
		tier       string
	}{
		{"whole prompt", "a", 1280, 0, true, 1279, TierHost},
		{"append 64 at τ 64", "a", 1344, 64, true, 1280, TierHost},
		{"append 64 at τ 63", "a", 1344, 63, false, 1280, TierHost},
		{"11 tokens", "a", 11, 0, true, 10, TierHost},
		{"10 tokens", "a", 10, 0, false, 0, TierNone},
		{"no record", "z", 1344, 0, false, 0, TierNone},
	} {
		n := (c.input + 63) / 64
		rep := w.AdmitSession(now, AdmitQuery{Session: c.sess, Blocks: a[:n], Input: c.input, Output: 4, MaxAppend: c.tau})
		mode := map[bool]AdmitMode{true: AdmitDirect, false: AdmitSeed}[c.direct]
		if !rep.CanAdmit || rep.Mode != mode || rep.HostTokens != c.host || rep.CachedTokens != c.host || rep.Tier != c.tier {
			t.Fatalf("%s: %+v; want %v with %d host tokens, tier %s", c.name, rep, mode, c.host, c.tier)
		}
	}
}

// A direct append from host needs room for the append, the loaded tokens
// and the output: 64 + 1,280 + 4 = 1,348. A pool of 1,348 grants it; one
// of 1,347 has no room for it, nor for the seed's 1,344 + 4: no-space.
func TestAdmitFromHostNeedsRoomForLoadAndAppend(t *testing.T) {
	for _, c := range []struct {
		pool int64
		ok   bool
	}{{1348, true}, {1347, false}} {
		w, a, now := hostDecoder(t, c.pool)
		rep := w.AdmitSession(now, AdmitQuery{Session: "a", Blocks: a[:21], Input: 1344, Output: 4})
		if c.ok && (!rep.CanAdmit || rep.Mode != AdmitDirect || rep.HostTokens != 1280) {
			t.Fatalf("pool %d: %+v, want a direct append loading 1280", c.pool, rep)
		}
		if !c.ok && (rep.CanAdmit || rep.Reason != ReasonNoSpace) {
			t.Fatalf("pool %d: %+v, want no-space", c.pool, rep)
		}
	}
}

// HBM holding part of an evicted session's prompt (another session, c,
// shares a[:10], 640 tokens) leaves host the rest: a 1,344-token turn of a
// has 640 cached in HBM, min(1,280, 1,343) − 640 = 640 from host, and
// appends 1,344 − 640 − 640 = 64, direct at τ_append 64.
func TestAdmitFromHostBeyondHBM(t *testing.T) {
	w, a, now := hostDecoder(t, 4000)
	now = seedOn(t, w, now, "c", a[:10], 640, 1)
	rep := w.AdmitSession(now, AdmitQuery{Session: "a", Blocks: a[:21], Input: 1344, Output: 4, MaxAppend: 64})
	if !rep.CanAdmit || rep.Mode != AdmitDirect || rep.Tier != TierHost || rep.HostTokens != 640 || rep.CachedTokens != 1280 {
		t.Fatalf("%+v, want a direct append with 640 from host, 1280 cached", rep)
	}
}

// Naming a demoted tail that covers no whole block past its prompt files
// nothing and leaves host's LRU as it was. Host holds prompt A (written at
// 1) and X (at 2); a's tail of 5 tokens after its 64-token prompt reaches
// (64 + 5) / 16 = 4 blocks, the prompt's own 4: nothing to name. Making
// room for one path afterwards still takes A, the older.
func TestHiNameOutputNothingWholeTouchesNothing(t *testing.T) {
	w := hiWorker(t, 1024, 2, WriteBack)
	A, X := chain(1, 4), chain(2, 4)
	w.hiWrite(1, A, 16)
	w.hiWrite(2, X, 16)
	w.hiDemoteTail(&outputTail{session: SessionKey{ID: "a"}, lastWhole: A[3], input: 64, tokens: 5, at: 3, live: true})
	next := append(append([]uint64(nil), A...), chain(3, 2)...)
	w.hiNameOutput(5, &Request{Session: "a", Blocks: next, Input: 96})
	if w.hostTail("a") != nil || w.HostUsed() != 128 {
		t.Fatalf("after naming: host tail %v, host holds %d; want none, 128", w.hostTail("a"), w.HostUsed())
	}
	if !w.hiMakeRoom(w.host.capacity - 128 + 1) {
		t.Fatal("hiMakeRoom failed")
	}
	if w.HostPrefixMatch(A, 64) != 0 || w.HostPrefixMatch(X, 64) != 64 {
		t.Fatalf("host keeps A %d, X %d; want A evicted (older), X kept", w.HostPrefixMatch(A, 64), w.HostPrefixMatch(X, 64))
	}
}
