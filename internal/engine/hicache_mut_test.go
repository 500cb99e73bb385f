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
	w.hiDemoteTail(&outputTail{session: "a", tokens: 3000, at: 1, live: true}) // 3,000 > 2,048
	if w.stats.HostWriteSkips != 1 || w.HostUsed() != 0 || len(w.host.tails) != 0 {
		t.Fatalf("3,000-token tail into 2,048: %d skips, host holds %d; want 1, 0", w.stats.HostWriteSkips, w.HostUsed())
	}
	w.hiDemoteTail(&outputTail{session: "a", tokens: 100, at: 2, live: true})
	w.hiDemoteTail(&outputTail{session: "a", tokens: 0, at: 3, live: true})
	if ht := w.host.tails["a"]; ht == nil || ht.tokens != 100 || w.HostUsed() != 100 || w.stats.HostWrittenTokens != 100 {
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
		w.hiDemoteTail(&outputTail{session: "s", tokens: 100, at: c.tailAt, live: true})
		w.hiWrite(2, chain(1, 64), 16)
		if !w.hiMakeRoom(1000) {
			t.Fatal("hiMakeRoom(1000) failed")
		}
		tailGone := w.host.tails["s"] == nil
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
	if !w.hiDemote(now, n) {
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
			tl := &outputTail{session: fmt.Sprint("s", i), tokens: 1, at: float64(i), live: true}
			if w.tails == nil {
				w.tails = map[string]*outputTail{}
			}
			w.tails[tl.session] = tl
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
		if c.wantHead < len(w.tailOrder) && w.tailOrder[w.tailHead].session != fmt.Sprint("s", c.k) {
			t.Fatalf("HBM: the next tail is %s, want s%d", w.tailOrder[w.tailHead].session, c.k)
		}

		// Host's tails (hicache.go).
		h := hiWorker(t, 100000, 2, WriteBack)
		for i := 0; i < c.n; i++ {
			h.hiDemoteTail(&outputTail{session: fmt.Sprint("s", i), tokens: 1, at: float64(i), live: true})
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
		if c.wantHead < len(h.host.order) && h.host.order[h.host.head].session != fmt.Sprint("s", c.k) {
			t.Fatalf("host: the next tail is %s, want s%d", h.host.order[h.host.head].session, c.k)
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
