package radix

import (
	"math/rand/v2"
	"testing"
)

// TestPassReleasesWhenEveryHolderPassed: a node's sliding part is released
// only once every holder's window has left it, counted per node (a prefix
// two running requests share goes back once), and Unlock releases what the
// holders left behind had all passed. By hand, 16-token blocks: prompt a
// is blocks 1–10, prompt b shares a's first 6 and adds 2.
func TestPassReleasesWhenEveryHolderPassed(t *testing.T) {
	r := New(16)
	r.SetSliding(32)
	a := seq(1, 10)
	b := append(seq(1, 6), 101, 102)
	ma := r.Lock(a, 16, 0)
	na, _ := r.Insert(ma.Node, a, ma.Blocks, 16, 0)
	mb := r.Lock(b, 16, 0) // splits a's edge after 6 blocks
	nb, _ := r.Insert(mb.Node, b, mb.Blocks, 16, 0)
	checkRadix(t, r)

	pa := r.Pass(na, root, 4, 1) // a's window left blocks 0–3: b still holds them
	if got := r.ReleasedTokens(); got != 0 {
		t.Fatalf("after a passed 4 blocks released %d, want 0 (b holds them)", got)
	}
	pb := r.Pass(nb, root, 5, 2) // blocks 0–3 passed by both: 4 × 16 = 64
	if got := r.ReleasedTokens(); got != 64 {
		t.Fatalf("after b passed 5 blocks released %d, want 64", got)
	}
	pa = r.Pass(na, pa, 7, 3) // block 4 now passed by both (+16), block 6 is a's alone (+16)
	if got := r.ReleasedTokens(); got != 96 {
		t.Fatalf("after a passed 7 blocks released %d, want 64 + 16 + 16 = 96", got)
	}
	if got := r.Pass(na, pa, 6, 4); got != pa {
		t.Fatalf("a pass backwards moved its passed node %d → %d", pa, got)
	}
	checkRadix(t, r)
	// b ends: block 5 is now held only by a, which passed it (+16).
	r.Unpass(pb)
	r.Unlock(nb, 5)
	if got := r.ReleasedTokens(); got != 112 {
		t.Fatalf("after b ended released %d, want 96 + 16 = 112", got)
	}
	r.Unpass(pa)
	r.Unlock(na, 6)
	checkRadix(t, r)
	// Released parts stay released when their holders are gone: vLLM freed
	// those blocks while the requests ran.
	if got := r.ReleasedTokens(); got != 112 {
		t.Fatalf("after a ended released %d, want 112", got)
	}
}

// TestDropReleasedOldestFirst: the pool takes back released sliding parts
// in the order they were released, and a tombstone is not taken twice.
func TestDropReleasedOldestFirst(t *testing.T) {
	r := New(16)
	r.SetSliding(32)
	a := seq(1, 4)
	b := seq(100, 2)
	ma := r.Lock(a, 16, 0)
	na, _ := r.Insert(ma.Node, a, 0, 16, 0)
	mb := r.Lock(b, 16, 0)
	nb, _ := r.Insert(mb.Node, b, 0, 16, 0)
	pb := r.Pass(nb, root, 2, 1) // b's 32 tokens released at t = 1
	pa := r.Pass(na, root, 4, 2) // a's 64 at t = 2
	if at, ok := r.OldestReleased(); !ok || at != 1 {
		t.Fatalf("oldest released at %v (%v), want 1", at, ok)
	}
	v := r.Version()
	if got := r.DropReleased(); got != 32 || r.Version() <= v {
		t.Fatalf("first drop took %d (version %d, was %d), want b's 32 and a later version", got, r.Version(), v)
	}
	if got := r.DropReleased(); got != 64 {
		t.Fatalf("second drop took %d, want a's 64", got)
	}
	if got := r.DropReleased(); got != 0 {
		t.Fatalf("third drop took %d, want 0", got)
	}
	if r.GoneTokens() != 96 || r.ReleasedTokens() != 0 {
		t.Fatalf("gone %d released %d, want 96, 0", r.GoneTokens(), r.ReleasedTokens())
	}
	r.Unpass(pa)
	r.Unlock(na, 3)
	r.Unpass(pb)
	r.Unlock(nb, 3)
	checkRadix(t, r)
	// Evicting a tombstoned leaf takes its tokens out of the count.
	r.Evict(1 << 20)
	if r.GoneTokens() != 0 || r.Tokens() != 0 {
		t.Fatalf("after evicting all: gone %d tokens %d", r.GoneTokens(), r.Tokens())
	}
}

// tombstoneRange makes blocks [from, to) of path p a tombstone: a holder
// locks p, passes to `to` (splitting there), and the pool drops what that
// releases; a second holder of [0, from), which passes nothing, keeps
// those blocks held. Ranges go right to left (a tombstone cuts the
// second holder's match of a prefix ending just past it).
func tombstoneRange(t *testing.T, r *Tree, p []uint64, from, to int, now float64) {
	t.Helper()
	keep := r.Lock(p[:from], 16, now)
	m := r.Lock(p, 16, now)
	passed := r.Pass(m.Node, root, to, now)
	for r.DropReleased() > 0 {
	}
	r.Unpass(passed)
	r.Unlock(m.Node, now)
	r.Unlock(keep.Node, now)
	checkRadix(t, r)
}

// TestMatchStopsBeforeATombstonedWindow is the match limit by hand: a
// 10-block path of 16-token blocks, the run the window needs 32 tokens
// (vLLM: cdiv(window 33 − 1, 16) = 2 blocks). The match ends at the end of
// the rightmost run of untombstoned nodes of at least 32 tokens, or of the
// run from the root, whatever its length.
func TestMatchStopsBeforeATombstonedWindow(t *testing.T) {
	p := seq(1, 10)
	for _, c := range []struct {
		name   string
		gone   [][2]int // block ranges tombstoned, right to left
		blocks int      // the match, in blocks
	}{
		{"nothing gone", nil, 10},
		{"gone in the middle, 4 blocks intact after", [][2]int{{4, 6}}, 10},
		{"gone up to the last block: 1 block after it is short, the root run is 0", [][2]int{{0, 9}}, 0},
		{"gone at 6–9: 1 block after, the root run 0–5 holds", [][2]int{{6, 9}}, 6},
		{"two tombstones: the run 3–5 of 48 tokens between them", [][2]int{{6, 9}, {2, 3}}, 6},
		{"two tombstones: the run 3 of 16 tokens is short, the root run 0–1", [][2]int{{4, 9}, {2, 3}}, 2},
		{"the first block gone, 2 intact after it", [][2]int{{0, 8}}, 10},
		{"a run of exactly 32 tokens between two tombstones, 16 after", [][2]int{{3, 9}, {0, 1}}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := New(16)
			r.SetSliding(32)
			put(r, p, 16, 0)
			for i, g := range c.gone {
				tombstoneRange(t, r, p, g[0], g[1], float64(i+1))
			}
			var gone int64
			for _, g := range c.gone {
				gone += int64(g[1]-g[0]) * 16
			}
			if r.GoneTokens() != gone {
				t.Fatalf("gone %d tokens, want %d", r.GoneTokens(), gone)
			}
			m := r.Match(p, 16)
			if m.Blocks != c.blocks || m.Tokens != int64(c.blocks)*16 {
				t.Fatalf("match %d blocks / %d tokens, want %d / %d", m.Blocks, m.Tokens, c.blocks, c.blocks*16)
			}
			// Locking the cut match locks exactly its path.
			l := r.LockMatched(p, m, 9)
			if l.Blocks != c.blocks {
				t.Fatalf("locked %d blocks, want %d", l.Blocks, c.blocks)
			}
			r.Unlock(l.Node, 9)
			checkRadix(t, r)
		})
	}
}

// A match that ends partly inside an edge counts only the blocks it
// matched there: blocks 0–1 intact, 2–3 a tombstone, 4–9 intact, and a
// prompt that leaves the path after block 4 has 16 intact tokens after
// the tombstone, short of 32: it ends at block 2.
func TestMatchCountsOnlyThePartOfAnEdgeItMatched(t *testing.T) {
	r := New(16)
	r.SetSliding(32)
	p := seq(1, 10)
	put(r, p, 16, 0)
	tombstoneRange(t, r, p, 4, 10, 1)
	r.revive(r.Match(p, 16).Node) // nothing to revive at the root
	checkRadix(t, r)
	// Rebuild: intact 0–1, gone 2–3, intact 4–9.
	r = New(16)
	r.SetSliding(32)
	put(r, p, 16, 0)
	tombstoneRange(t, r, p, 2, 4, 1)
	q := append(seq(1, 5), 999)
	if m := r.Match(q, 16); m.Blocks != 2 || m.Tokens != 32 {
		t.Fatalf("match %d blocks / %d tokens, want 2 / 32", m.Blocks, m.Tokens)
	}
	if m := r.Match(append(seq(1, 6), 999), 16); m.Blocks != 6 {
		t.Fatalf("with 2 blocks after the tombstone: match %d blocks, want 6", m.Blocks)
	}
}

// Releases at the same instant go back in the order they were released.
func TestDropReleasedKeepsTheReleaseOrderAtOneInstant(t *testing.T) {
	r := New(16)
	r.SetSliding(32)
	a, b := seq(1, 2), seq(100, 4)
	ma := r.Lock(a, 16, 0)
	na, _ := r.Insert(ma.Node, a, 0, 16, 0)
	mb := r.Lock(b, 16, 0)
	nb, _ := r.Insert(mb.Node, b, 0, 16, 0)
	r.Pass(na, root, 2, 1) // a's 32 first
	r.Pass(nb, root, 4, 1) // then b's 64, at the same time
	if got := r.DropReleased(); got != 32 {
		t.Fatalf("first drop took %d, want a's 32", got)
	}
}

// A holder's first Pass takes back the released nodes inside its window,
// and PassGain says beforehand what any first Pass will change. 16-token
// blocks: a (blocks 1–4) ran and left all 4 released; h locks a and
// passes 2: the 2 blocks inside its window are held again (released 64 →
// 32); PassGain said (0 released, 32 held back). A later Pass releases
// what it passes and takes nothing back.
func TestPassTakesBackItsWindow(t *testing.T) {
	r := New(16)
	r.SetSliding(32)
	a := seq(1, 4)
	m := r.Lock(a, 16, 0)
	n, _ := r.Insert(m.Node, a, 0, 16, 0)
	p := r.Pass(n, root, 4, 1)
	r.Unpass(p)
	r.Unlock(n, 2)
	if r.ReleasedTokens() != 64 {
		t.Fatalf("a left %d released, want 64", r.ReleasedTokens())
	}
	h := r.Lock(a, 16, 3)
	if rel, hold := r.PassGain(h.Node, 2); rel != 0 || hold != 32 {
		t.Fatalf("PassGain = %d, %d; want 0, 32", rel, hold)
	}
	hp := r.Pass(h.Node, root, 2, 3)
	if r.ReleasedTokens() != 32 {
		t.Fatalf("h passed 2: %d released, want 32", r.ReleasedTokens())
	}
	hp = r.Pass(h.Node, hp, 3, 4)
	if r.ReleasedTokens() != 48 {
		t.Fatalf("h passed 3: %d released, want 48", r.ReleasedTokens())
	}
	r.Unpass(hp)
	r.Unlock(h.Node, 5)
	checkRadix(t, r)
}

// TestInsertRevivesATombstone: a request whose match a tombstone cut short
// computes the rest of its prompt again, so inserting it holds those
// nodes' sliding part anew and the next match is whole.
func TestInsertRevivesATombstone(t *testing.T) {
	r := New(16)
	r.SetSliding(32)
	p := seq(1, 10)
	put(r, p, 16, 0)
	tombstoneRange(t, r, p, 6, 9, 1)
	m := r.Lock(p, 16, 2)
	if m.Blocks != 6 {
		t.Fatalf("cut match %d blocks, want 6", m.Blocks)
	}
	v := r.Version()
	n, adopted := r.Insert(m.Node, p, m.Blocks, 16, 2)
	if r.Version() <= v {
		t.Errorf("version %d after the revival, was %d: a match moved", r.Version(), v)
	}
	if adopted != 0 {
		t.Fatalf("adopted %d, want 0 (the blocks are cached)", adopted)
	}
	if r.GoneTokens() != 0 {
		t.Fatalf("gone %d after the insert, want 0", r.GoneTokens())
	}
	r.Unlock(n, 3)
	if got := r.Match(p, 16); got.Blocks != 10 {
		t.Fatalf("match after the insert %d blocks, want 10", got.Blocks)
	}
	checkRadix(t, r)
}

// TestSlidingJournalNamesEveryMovedMatch is the journal's contract with
// tombstones: a match a tombstone cut short, or could cut, moves only
// when a slot MatchSlots gave for it is named. Random prompts are locked,
// inserted, passed, unlocked, evicted and their released parts dropped,
// under both kinds of sliding state.
func TestSlidingJournalNamesEveryMovedMatch(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		rng := rand.New(rand.NewPCG(seed, 23))
		r := New(8)
		if run := int64(8 * (1 + rng.IntN(3))); seed%2 == 0 {
			r.SetSlidingPool(run) // SGLang's: unreferenced nodes released too
		} else {
			r.SetSliding(run)
		}
		r.Journal(true)
		type watched struct {
			blocks []uint64
			m      Match
			slots  []Slot
		}
		prompt := func() []uint64 {
			n := 1 + rng.IntN(9)
			b := make([]uint64, n)
			for i := range b {
				b[i] = uint64(1 + rng.IntN(2) + 10*i*rng.IntN(2))
			}
			return b
		}
		watch := func(w *watched) {
			w.m = r.Match(w.blocks, 8)
			w.slots = w.slots[:0]
			look, lok, up, uok := r.MatchSlots(w.blocks, w.m)
			if lok {
				w.slots = append(w.slots, look)
			}
			if uok {
				w.slots = append(w.slots, up)
			}
		}
		ws := make([]*watched, 12)
		for i := range ws {
			ws[i] = &watched{blocks: prompt()}
			watch(ws[i])
		}
		type holder struct{ node, passed int32 }
		var hs []holder
		for step := 0; step < 300; step++ {
			now := float64(step)
			switch op := rng.IntN(12); {
			case op < 4:
				b := prompt()
				m := r.Lock(b, 8, now)
				n, _ := r.Insert(m.Node, b, m.Blocks, 8, now)
				h := holder{node: n}
				if rng.IntN(2) == 0 {
					// A first Pass changes the released tokens by what
					// PassGain says.
					k := rng.IntN(10)
					rel, hold := r.PassGain(n, k)
					before := r.ReleasedTokens()
					h.passed = r.Pass(n, root, k, now)
					if r.Sliding() && !r.spool && r.ReleasedTokens()-before != rel-hold {
						t.Fatalf("seed %d step %d: PassGain said +%d −%d, the Pass moved released %d → %d",
							seed, step, rel, hold, before, r.ReleasedTokens())
					}
				}
				hs = append(hs, h)
			case op < 7 && len(hs) > 0:
				h := &hs[rng.IntN(len(hs))]
				h.passed = r.Pass(h.node, h.passed, rng.IntN(10), now)
			case op < 9 && len(hs) > 0:
				i := rng.IntN(len(hs))
				r.Unpass(hs[i].passed)
				r.Unlock(hs[i].node, now)
				hs = append(hs[:i], hs[i+1:]...)
			case op < 10:
				r.Evict(int64(rng.IntN(30)))
			default:
				r.DropReleased()
			}
			changed := map[Slot]bool{}
			for _, s := range r.TakeChanges() {
				changed[s] = true
			}
			for i, w := range ws {
				moved := false
				for _, s := range w.slots {
					moved = moved || changed[s]
				}
				if moved {
					watch(w)
					continue
				}
				if got := r.Match(w.blocks, 8); got.Blocks != w.m.Blocks || got.Tokens != w.m.Tokens {
					t.Fatalf("seed %d step %d: prompt %d %v now matches %d blocks, was %d, and no change named its slots",
						seed, step, i, w.blocks, got.Blocks, w.m.Blocks)
				}
			}
			checkRadix(t, r)
		}
	}
}

// TestSlidingPoolReleasesWhatNoLockHolds is SGLang's kind of sliding
// state: a node's sliding part is evictable (released) once no holder
// needs it, unreferenced nodes included, a lock takes it back, and the
// pool takes back the least recently used first. 16-token blocks: a
// (blocks 1–4) cached at t = 1, b (blocks 11–12) at t = 2; a locked again
// at t = 3 (its last use now) and passed 2 blocks deep at t = 4. b, used
// at t = 2, goes first, and whole: an unreferenced leaf (its full part
// too, 32 tokens); then a's first 2 blocks, an inner node, are
// tombstoned (32 gone).
func TestSlidingPoolReleasesWhatNoLockHolds(t *testing.T) {
	r := New(16)
	r.SetSlidingPool(32)
	a, b := seq(1, 4), seq(11, 2)
	put(r, a, 16, 1)
	put(r, b, 16, 2)
	if got := r.ReleasedTokens(); got != 96 {
		t.Fatalf("cached, unreferenced: %d released, want 64 + 32 = 96", got)
	}
	m := r.Lock(a, 16, 3)
	if got := r.ReleasedTokens(); got != 32 {
		t.Fatalf("a locked: %d released, want b's 32", got)
	}
	passed := r.Pass(m.Node, root, 2, 4) // a's blocks 1–2 behind the holder's window
	if got := r.ReleasedTokens(); got != 64 {
		t.Fatalf("a passed 2 blocks: %d released, want 32 + 32 = 64", got)
	}
	checkRadix(t, r)
	if got := r.DropReleased(); got != 32 {
		t.Fatalf("first drop took %d, want b's 32 (released at t = 2)", got)
	}
	if got := r.DropReleased(); got != 32 {
		t.Fatalf("second drop took %d, want a's first 2 blocks, 32", got)
	}
	if got := r.DropReleased(); got != 0 {
		t.Fatalf("third drop took %d, want 0 (a's last 2 blocks are locked)", got)
	}
	r.Unpass(passed)
	r.Unlock(m.Node, 5)
	if r.ReleasedTokens() != 32 || r.GoneTokens() != 32 || r.Tokens() != 64 {
		t.Fatalf("a unlocked: %d released, %d gone, %d cached; want 32, 32, 64 (b evicted whole)",
			r.ReleasedTokens(), r.GoneTokens(), r.Tokens())
	}
	checkRadix(t, r)
}

// TestSlidingPoolTakesBackByLastUse is SGLang's SWA LRU order, not the
// release order: a (blocks 1–4) is locked and inserted at t = 1 and held;
// b (blocks 11–12) is cached at t = 3, released then; a's holder passes
// a's first 2 blocks at t = 5, released then but last used at t = 1. The
// pool takes a's 2 blocks first (used at 1 < 3): an inner node, so a
// tombstone (32 gone, 96 still cached, b still matched whole); then b, an
// unreferenced leaf, whole (64 cached); then nothing (a's last 2 blocks
// are held). The least recently released (b) first would have
// tombstoned b.
func TestSlidingPoolTakesBackByLastUse(t *testing.T) {
	r := New(16)
	r.SetSlidingPool(32)
	a, b := seq(1, 4), seq(11, 2)
	ma := r.Lock(a, 16, 1)
	na, _ := r.Insert(ma.Node, a, ma.Blocks, 16, 1)
	put(r, b, 16, 3)
	passed := r.Pass(na, root, 2, 5)
	if got := r.DropReleased(); got != 32 || r.GoneTokens() != 32 || r.Tokens() != 96 {
		t.Fatalf("first drop took %d: %d gone, %d cached; want 32, 32, 96", got, r.GoneTokens(), r.Tokens())
	}
	if m := r.Match(b, 16); m.Tokens != 32 {
		t.Fatalf("b matches %d tokens after the first drop, want 32 (a's blocks went first)", m.Tokens)
	}
	if got := r.DropReleased(); got != 32 || r.Tokens() != 64 || r.GoneTokens() != 32 {
		t.Fatalf("second drop took %d: %d cached, %d gone; want 32, 64, 32 (b evicted whole)", got, r.Tokens(), r.GoneTokens())
	}
	if got := r.DropReleased(); got != 0 {
		t.Fatalf("third drop took %d, want 0", got)
	}
	r.Unpass(passed)
	r.Unlock(na, 6)
	checkRadix(t, r)
}

// TestSlidingPoolTombstonesNearerTheRootFirst: at one instant SGLang's SWA
// LRU has a path's nodes nearer the root behind the deeper ones, so they
// are tombstoned first, and a leaf freed whole takes the tombstoned
// ancestors it leaves childless with it. e (blocks 31–32) cached, then e2
// (blocks 31–34) at t = 9: both nodes last used at 9. The first drop
// tombstones e's node (32 gone, 64 cached), not the leaf; the second
// frees the leaf (blocks 33–34) whole and then e's tombstone, childless
// and unreferenced: nothing cached, nothing gone.
func TestSlidingPoolTombstonesNearerTheRootFirst(t *testing.T) {
	r := New(16)
	r.SetSlidingPool(32)
	put(r, seq(31, 2), 16, 8)
	put(r, seq(31, 4), 16, 9)
	if got := r.DropReleased(); got != 32 || r.GoneTokens() != 32 || r.Tokens() != 64 {
		t.Fatalf("first drop took %d: %d gone, %d cached; want 32, 32, 64", got, r.GoneTokens(), r.Tokens())
	}
	if got := r.DropReleased(); got != 32 || r.GoneTokens() != 0 || r.Tokens() != 0 {
		t.Fatalf("second drop took %d: %d gone, %d cached; want 32, 0, 0", got, r.GoneTokens(), r.Tokens())
	}
	checkRadix(t, r)
}

// PassGain counts a passed node's tokens as the Pass does, a partial last
// block included: a 3-block prompt whose last block holds 5 tokens (37
// tokens) passed whole releases 37; a second holder's PassGain over the
// released node then changes nothing.
func TestPassGainCountsAPartialBlock(t *testing.T) {
	r := New(16)
	r.SetSliding(32)
	p := seq(1, 3)
	m := r.Lock(p, 5, 0)
	n, _ := r.Insert(m.Node, p, 0, 5, 0)
	if rel, hold := r.PassGain(n, 3); rel != 37 || hold != 0 {
		t.Fatalf("PassGain = %d, %d; want 37, 0", rel, hold)
	}
	r.Pass(n, root, 3, 1)
	if r.ReleasedTokens() != 37 {
		t.Fatalf("released %d, want 37", r.ReleasedTokens())
	}
	h := r.Lock(p, 5, 2)
	if rel, hold := r.PassGain(h.Node, 3); rel != 0 || hold != 0 {
		t.Fatalf("second holder's PassGain = %d, %d; want 0, 0", rel, hold)
	}
}

// A tombstone changes what matches, so Version moves on, never back.
func TestSlidingChangesMoveTheVersion(t *testing.T) {
	r := New(16)
	r.SetSliding(32)
	p := seq(1, 10)
	put(r, p, 16, 0)
	v := r.Version()
	tombstoneRange(t, r, p, 0, 8, 1)
	if r.Version() <= v {
		t.Fatalf("version %d after a tombstone, was %d", r.Version(), v)
	}
	v = r.Version()
	m := r.Lock(p, 16, 2)
	n, _ := r.Insert(m.Node, p, m.Blocks, 16, 2) // the match is whole: nothing revived
	r.Unlock(n, 2)
	q := append(seq(1, 4), 77)
	mq := r.Lock(q, 16, 3) // inside the tombstone: matches nothing
	nq, _ := r.Insert(mq.Node, q, mq.Blocks, 16, 3)
	if r.GoneTokens() != 64 || r.Version() <= v {
		t.Fatalf("after reviving blocks 0–3: %d gone, version %d (was %d); want 64, higher", r.GoneTokens(), r.Version(), v)
	}
	r.Unlock(nq, 4)
	checkRadix(t, r)
}

// A tree keeps sliding state only when asked to.
func TestSlidingIsOptIn(t *testing.T) {
	r := New(16)
	if r.Sliding() {
		t.Error("a new tree keeps sliding state")
	}
	r.SetSliding(0) // any run: at least a token
	if !r.Sliding() {
		t.Error("SetSliding(0) left the tree without sliding state")
	}
}

// TestSlidingPoolEvictionTakesTombstonedParents: when the full pool
// evicts a leaf, SGLang also frees the tombstoned ancestors it leaves
// childless (_iteratively_delete_tombstone_leaf): no leaf is a tombstone.
// a (blocks 1–4) then a2 (1–6) cached at t = 1: the first drop tombstones
// a's node (nearer the root), 64 gone. Evicting the least recently used
// leaf (blocks 5–6, 32 tokens) then frees a's tombstone too: 96 freed,
// nothing cached, nothing gone.
func TestSlidingPoolEvictionTakesTombstonedParents(t *testing.T) {
	r := New(16)
	r.SetSlidingPool(32)
	put(r, seq(1, 4), 16, 1)
	put(r, seq(1, 6), 16, 1)
	if got := r.DropReleased(); got != 64 || r.GoneTokens() != 64 {
		t.Fatalf("drop took %d, %d gone; want 64, 64", got, r.GoneTokens())
	}
	if got := r.Evict(1); got != 96 || r.Tokens() != 0 || r.GoneTokens() != 0 {
		t.Fatalf("evict freed %d: %d cached, %d gone; want 96, 0, 0", got, r.Tokens(), r.GoneTokens())
	}
	checkRadix(t, r)
}

// TestBuryTombstonesASpan: Bury makes blocks [from, to) of a path a
// tombstone, splitting at both bounds. An 8-block path (16-token blocks,
// a run of 32 tokens): burying blocks 2–4 leaves 0–1 and 5–7 held, 48
// tokens gone; the whole path still matches (48 tokens after the
// tombstone), a prompt ending in it matches its first 2 blocks (32). A
// second Bury of the same span changes nothing, an empty span nothing,
// and a span past the path's end stops at it: blocks 6–7, 32 more.
func TestBuryTombstonesASpan(t *testing.T) {
	r := New(16)
	r.SetSlidingPool(32)
	p := seq(1, 8)
	m := r.Lock(p, 16, 1)
	n, _ := r.Insert(m.Node, p, 0, 16, 1)
	v := r.Version()
	r.Bury(n, 2, 5)
	if r.GoneTokens() != 48 || r.Version() <= v {
		t.Fatalf("%d gone (want 48), version %d (was %d, want later)", r.GoneTokens(), r.Version(), v)
	}
	r.Bury(n, 2, 5)
	r.Bury(n, 4, 4)
	if r.GoneTokens() != 48 {
		t.Fatalf("a second or empty Bury: %d gone, want 48", r.GoneTokens())
	}
	// A span ending on a node boundary splits nothing there, and one
	// inside a node that does not start at the root splits it where the
	// span is: blocks 0–1 (32 more), then blocks 6 only (16 more).
	r.Bury(n, 0, 2)
	if r.GoneTokens() != 80 {
		t.Fatalf("blocks 0–1 buried: %d gone, want 80", r.GoneTokens())
	}
	r.Bury(n, 6, 7)
	if r.GoneTokens() != 96 {
		t.Fatalf("block 6 buried: %d gone, want 96", r.GoneTokens())
	}
	checkRadix(t, r)
	r.Unlock(n, 2)
	if got := r.Match(seq(1, 6), 16).Tokens; got != 0 {
		t.Fatalf("a prompt of blocks 0–5 matches %d, want 0 (every block before its end is gone but 5)", got)
	}
	r = New(16)
	r.SetSlidingPool(32)
	m = r.Lock(p, 16, 1)
	n, _ = r.Insert(m.Node, p, 0, 16, 1)
	r.Bury(n, 2, 5)
	r.Unlock(n, 2)
	if got := r.Match(p, 16).Tokens; got != 128 {
		t.Fatalf("the whole path matches %d, want 128", got)
	}
	if got := r.Match(append(seq(1, 5), 99), 16).Tokens; got != 32 {
		t.Fatalf("a prompt ending in the tombstone matches %d, want 32", got)
	}
	checkRadix(t, r)
	m = r.Lock(p, 16, 3)
	r.Bury(m.Node, 6, 100)
	if r.GoneTokens() != 80 {
		t.Fatalf("%d gone, want 48 + 32 = 80", r.GoneTokens())
	}
	r.Unlock(m.Node, 4)
	checkRadix(t, r)
}

// TestTailBelowKeepsALeafInner: a node an owner keeps a tail below is
// tombstoned by the sliding pool, not freed whole (64 gone, 64 cached);
// once the tail goes, evicting it frees it; a stale handle changes
// nothing.
func TestTailBelowKeepsALeafInner(t *testing.T) {
	r := New(16)
	r.SetSlidingPool(32)
	n := put(r, seq(1, 4), 16, 1)
	h := r.HandleOf(n)
	r.TailBelow(h, 1)
	if got := r.DropReleased(); got != 64 || r.GoneTokens() != 64 || r.Tokens() != 64 {
		t.Fatalf("drop took %d: %d gone, %d cached; want 64, 64, 64", got, r.GoneTokens(), r.Tokens())
	}
	r.TailBelow(h, -1)
	if got := r.Evict(1); got != 64 || r.Tokens() != 0 {
		t.Fatalf("evict freed %d, %d cached; want 64, 0", got, r.Tokens())
	}
	r.TailBelow(h, 1)
	r.TailBelow(Handle{}, 1)
	checkRadix(t, r)
}

// TestTailsHoldWindowLetsANextTurnThrough: in a tree that records prompts
// only (SetTailsHoldWindow), a tombstoned prompt end with a tail below it
// does not cut a match whose blocks run on past it, or stop one block short
// of its end (the prompt's partly filled last block took a new id); a
// match that ends on it, or parts from it two blocks short, is cut as
// before, and a tree without the setting cuts them all. Blocks as tokens,
// a run of 2.
func TestTailsHoldWindowLetsANextTurnThrough(t *testing.T) {
	for _, on := range []bool{true, false} {
		r := New(1)
		r.SetSlidingPool(2)
		if on {
			r.SetTailsHoldWindow()
		}
		n := put(r, seq(1, 4), 1, 1)
		r.TailBelow(r.HandleOf(n), 1)
		if got := r.DropReleased(); got != 4 || r.GoneTokens() != 4 {
			t.Fatalf("drop took %d, %d gone; want 4, 4", got, r.GoneTokens())
		}
		for _, c := range []struct {
			blocks  []uint64
			through int
			named   bool // TailInto names the node (the match reaches it)
		}{
			{seq(1, 6), 4, true},
			{append(seq(1, 3), 99, 100), 3, true},
			{append(seq(1, 2), 99, 100), 0, false},
			{seq(1, 4), 0, true},
			{seq(1, 3), 0, true},
		} {
			want := c.through
			if !on {
				want = 0
			}
			m := r.Match(c.blocks, 1)
			if m.Blocks != want {
				t.Errorf("tails hold a window %v: %v matches %d, want %d", on, c.blocks, m.Blocks, want)
			}
			if got := r.TailInto(c.blocks, r.matchUncut(c.blocks)) == r.HandleOf(n); got != c.named {
				t.Errorf("tails %v: TailInto(%v) names the tail node: %v", on, c.blocks, got)
			}
		}
		r.TailBelow(r.HandleOf(n), -1)
		if got := r.Match(seq(1, 6), 1).Blocks; got != 0 {
			t.Errorf("tails %v: with the tail gone a next turn matches %d, want 0", on, got)
		}
		checkRadix(t, r)
	}
}

// matchUncut is the plain match, whatever tombstones it crosses.
func (r *Tree) matchUncut(blocks []uint64) Match {
	r.nocut = true
	defer func() { r.nocut = false }()
	return r.Match(blocks, 1)
}
