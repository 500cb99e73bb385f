package engine

import (
	"fmt"
	"testing"
)

// Tests that pin trimorder.go's rules, values worked out by hand.

// popAll empties h, returning the sessions' last uses in pop order.
func popAll(h *trimHeap) []float64 {
	var out []float64
	for len(*h) > 0 {
		out = append(out, h.pop().lastUse)
	}
	return out
}

// popOrder empties o, returning the sessions' last uses in pop order.
func popOrder(o *trimOrder) []float64 {
	var out []float64
	for o.len() > 0 {
		out = append(out, o.pop().lastUse)
	}
	return out
}

func ascending(xs []float64) bool {
	for i := 1; i < len(xs); i++ {
		if xs[i] < xs[i-1] {
			return false
		}
	}
	return true
}

// The heap gives entries back least recently used first, whether pushed
// one by one (newest first, so every push sifts up) or built at once by
// init over an array in the worst order.
func TestMutTrimHeapOrder(t *testing.T) {
	var h trimHeap
	for i := 7; i >= 1; i-- {
		h.push(trimEntry{lastUse: float64(i), s: &dSession{id: fmt.Sprint(i)}})
	}
	if got := popAll(&h); len(got) != 7 || !ascending(got) {
		t.Fatalf("pushed 7..1, popped %v; want 1..7", got)
	}
	h = nil
	for i := 9; i >= 1; i-- {
		h = append(h, trimEntry{lastUse: float64(i), s: &dSession{id: fmt.Sprint(i)}})
	}
	h.init()
	if got := popAll(&h); len(got) != 9 || !ascending(got) {
		t.Fatalf("init over 9..1, popped %v; want 1..9", got)
	}
	// Equal last uses go by id.
	h = nil
	h.push(trimEntry{lastUse: 1, s: &dSession{id: "b"}})
	h.push(trimEntry{lastUse: 1, s: &dSession{id: "a"}})
	if e := h.pop(); e.s.id != "a" {
		t.Fatalf("tie at last use 1: popped %q first, want a", e.s.id)
	}
}

// pinSessions gives w n pinned sessions s0…, last used at 1, 2, …, each
// filed in the trim order once.
func pinSessions(w *Worker, n int) []*dSession {
	var ss []*dSession
	for i := range n {
		s := &dSession{id: fmt.Sprintf("s%02d", i), pinned: true, lastUse: float64(i + 1)}
		w.dsess.Put(s.key(), s)
		w.nPinned++
		w.sessionMoved(s)
		ss = append(ss, s)
	}
	return ss
}

// The trim order is compacted when it passes both 64 entries and 4 per
// pinned session: with 1 pinned session at 65 entries, with 20 at 81.
func TestMutTrimOrderCompaction(t *testing.T) {
	for _, tc := range []struct {
		pinned int
		limit  int // entries it may hold: max(64, 4·pinned)
	}{
		{1, 64},
		{20, 80},
	} {
		w := sessionWorker(t, EvictSession, 1<<20)
		ss := pinSessions(w, tc.pinned)
		for range tc.limit - tc.pinned { // a bounded loop: a mutant that compacts early fails, not hangs
			ss[0].lastUse++
			w.sessionMoved(ss[0])
		}
		if w.trimOrder.len() != tc.limit {
			t.Fatalf("%d pinned: %d entries, want %d (not compacted yet)", tc.pinned, w.trimOrder.len(), tc.limit)
		}
		work := w.schedWork
		ss[0].lastUse++
		w.sessionMoved(ss[0])
		if w.trimOrder.len() != tc.pinned || w.schedWork-work != uint64(tc.limit+1) {
			t.Fatalf("%d pinned, entry %d: %d entries (work +%d), want the %d live (work +%d)",
				tc.pinned, tc.limit+1, w.trimOrder.len(), w.schedWork-work, tc.pinned, tc.limit+1)
		}
		got := popOrder(&w.trimOrder)
		if !ascending(got) {
			t.Fatalf("%d pinned: compacted order pops %v, not least recently used first", tc.pinned, got)
		}
	}
}

// A trim looks at entries one at a time (schedWork counts them): a stale
// entry is dropped on the way. Under TrimIdle a session with a request
// here is passed over; under TrimAny it is taken.
func TestMutOldestPinned(t *testing.T) {
	for _, tc := range []struct {
		trim TrimPolicy
		want string
		work uint64
	}{
		{TrimIdle, "s01", 2}, // s00 busy: set aside, s01 taken
		{TrimAny, "s00", 1},
	} {
		w := sessionWorker(t, EvictSession, 1<<20)
		w.cfg.Session.Trim = tc.trim
		ss := pinSessions(w, 3)
		ss[0].inflight = 1
		work := w.schedWork
		if v := w.oldestPinned(""); v == nil || v.id != tc.want || w.schedWork-work != tc.work {
			t.Fatalf("trim %v: victim %v after %d looks, want %s after %d", tc.trim, v, w.schedWork-work, tc.want, tc.work)
		}
		if w.trimOrder.len() != 3 {
			t.Fatalf("trim %v: %d entries after the look, want all 3 back", tc.trim, w.trimOrder.len())
		}
	}
	// s00 used again at 10: its first entry goes stale and is dropped by
	// the next look, which then finds s01: two looks.
	w := sessionWorker(t, EvictSession, 1<<20)
	ss := pinSessions(w, 3)
	ss[0].lastUse = 10
	w.sessionMoved(ss[0])
	work := w.schedWork
	if v := w.oldestPinned(""); v != ss[1] || w.schedWork-work != 2 || w.trimOrder.len() != 3 {
		t.Fatalf("victim %v after %d looks, %d entries; want s01 after 2, 3 entries", v, w.schedWork-work, w.trimOrder.len())
	}
	if v := w.oldestPinned("s01"); v != ss[2] {
		t.Fatalf("victim but s01: %v, want s02", v)
	}
}

func hostTrimWorker(t *testing.T) *Worker {
	t.Helper()
	w, err := New(Config{Name: "d", Role: RoleDecode, Profile: testProfile(t), BlockSize: 64, PoolTokens: 20000,
		Session: SessionConfig{Enabled: true, Eviction: EvictSession},
		HiCache: HiCacheConfig{Enabled: true, Ratio: 3, WritePolicy: WriteThroughSelective, TrimHostFirst: true}})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// A host-aware trim looks at the TrimHostWindow (8) least recently used
// sessions only: with nine pinned and only the ninth on host, it takes
// the least recently used; with the eighth on host, the eighth.
func TestMutTrimHostWindow(t *testing.T) {
	for _, tc := range []struct {
		onHost int // which session (0-based, LRU order) the host holds
		want   int
	}{
		{8, 0}, // ninth: outside the window
		{7, 7}, // eighth: the window's last
	} {
		w := hostTrimWorker(t)
		now := 0.0
		var blocks [][]uint64
		for i := range 9 {
			blocks = append(blocks, chain(uint64(i+1), 5))
			now = seedOn(t, w, now, fmt.Sprintf("s%d", i), blocks[i], 320, 4)
		}
		w.hiWrite(now, blocks[tc.onHost], 64)
		for i := range 9 {
			if held := w.hostHolds(w.sess(SessionKey{ID: fmt.Sprintf("s%d", i)})); held != (i == tc.onHost) {
				t.Fatalf("host holds s%d: %v", i, held)
			}
		}
		if v := w.oldestPinned(""); v == nil || v.id != fmt.Sprintf("s%d", tc.want) {
			t.Fatalf("s%d on host: victim %v, want s%d", tc.onHost, v, tc.want)
		}
		if w.trimOrder.len() != 9 {
			t.Fatalf("%d trim entries after the look, want all 9 back", w.trimOrder.len())
		}
	}
}

// hostHolds compares what the host matches of the session's path with the
// path's tokens, the last block counted as the path has it: a path of 300
// tokens (4 full blocks and 44 tokens) is held by a host that holds those
// 5 blocks full (the match is min(320, 4·64 + 44) = 300).
func TestMutHostHoldsPartialLastBlock(t *testing.T) {
	w := hostTrimWorker(t)
	b := chain(20, 5)
	now := seedOn(t, w, 0, "p", b, 300, 4)
	s := w.sess(SessionKey{ID: "p"})
	if blocks, tokens := w.tree.PathBlocks(s.node); len(blocks) != 5 || tokens != 300 {
		t.Fatalf("p's path: %d blocks, %d tokens; want 5 and 300", len(blocks), tokens)
	}
	if w.hostHolds(s) {
		t.Fatal("host holds p before any write")
	}
	w.hiWrite(now, b, 64)
	if !w.hostHolds(s) {
		t.Fatal("host holds p's 5 blocks full, yet hostHolds says no")
	}
}
