package radix

import (
	"math/rand/v2"
	"testing"
)

func seq(from, n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(from + i)
	}
	return out
}

func TestRadixMatchInsertSplit(t *testing.T) {
	r := New(16)
	a := seq(1, 10) // 10 blocks, last partial with 5 tokens
	m := r.Lock(a, 5, 0)
	if m.Blocks != 0 || m.Tokens != 0 {
		t.Fatalf("empty tree matched %+v", m)
	}
	n, adopted := r.Insert(m.Node, a, 0, 5, 0)
	if want := int64(9*16 + 5); adopted != want || r.Tokens() != want {
		t.Fatalf("adopted %d, tree %d, want %d", adopted, r.Tokens(), want)
	}
	if r.EvictableTokens() != 0 {
		t.Fatalf("locked prompt counted evictable: %d", r.EvictableTokens())
	}
	r.Unlock(n, 1)
	if r.EvictableTokens() != r.Tokens() {
		t.Fatalf("after unlock evictable %d != tokens %d", r.EvictableTokens(), r.Tokens())
	}
	// Same prompt, same partial tail: whole match.
	if got := r.Match(a, 5); got.Blocks != 10 || got.Tokens != 149 {
		t.Fatalf("full match = %+v", got)
	}
	// A longer prompt running past the partial block matches only up to it.
	b := append(seq(1, 10), 100, 101)
	if got := r.Match(b, 16); got.Blocks != 9 || got.Tokens != 144 {
		t.Fatalf("match past partial = %+v, want 9 blocks/144 tokens", got)
	}
	// Diverging after 4 blocks splits the edge.
	c := append(seq(1, 4), 200, 201)
	mc := r.Lock(c, 16, 2)
	if mc.Blocks != 4 || mc.Tokens != 64 {
		t.Fatalf("diverging match = %+v", mc)
	}
	n2, ad2 := r.Insert(mc.Node, c, mc.Blocks, 16, 2)
	if ad2 != 32 {
		t.Fatalf("adopted %d, want 32", ad2)
	}
	// Extending the partial block upgrades it to full.
	mb := r.Lock(b, 16, 3)
	n3, ad3 := r.Insert(mb.Node, b, mb.Blocks, 16, 3)
	if want := int64(16 - 5 + 32); ad3 != want {
		t.Fatalf("extension adopted %d, want %d", ad3, want)
	}
	if want := int64(9*16+5) + 32 + 11 + 32; r.Tokens() != want {
		t.Fatalf("tree tokens %d, want %d", r.Tokens(), want)
	}
	r.Unlock(n2, 4)
	r.Unlock(n3, 5)
	checkRadix(t, r)
	// Evict everything: the least recently used branch goes first.
	freed := r.Evict(1)
	if freed != 32 { // c's private tail, unlocked at t=4
		t.Fatalf("first eviction freed %d, want 32 (LRU leaf)", freed)
	}
	r.Evict(1 << 40)
	if r.Tokens() != 0 || r.EvictableTokens() != 0 {
		t.Fatalf("after evicting all: tokens %d evictable %d", r.Tokens(), r.EvictableTokens())
	}
}

// checkRadix verifies the tree's counters against its nodes.
func checkRadix(t *testing.T, r *Tree) {
	t.Helper()
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestRadixProperty runs random sessions of growing prompts with locks,
// inserts, unlocks and evictions, checking the accounting after every step.
func TestRadixProperty(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		r := New(8)
		type held struct{ node int32 }
		var locks []held
		sessions := make([][]uint64, 6)
		for i := range sessions {
			sessions[i] = seq(i*100000+1, 1+rng.IntN(5))
		}
		for step := 0; step < 400; step++ {
			switch op := rng.IntN(10); {
			case op < 5:
				s := rng.IntN(len(sessions))
				// grow the session's chain; sometimes branch from a prefix
				chain := sessions[s]
				if rng.IntN(4) == 0 && len(chain) > 2 {
					chain = append([]uint64(nil), chain[:rng.IntN(len(chain)-1)+1]...)
				}
				chain = append(chain, uint64(s*100000+50000+step*10+rng.IntN(3)))
				sessions[s] = chain
				last := int64(1 + rng.IntN(8))
				m := r.Lock(chain, last, float64(step))
				n, _ := r.Insert(m.Node, chain, m.Blocks, last, float64(step))
				locks = append(locks, held{n})
			case op < 8 && len(locks) > 0:
				i := rng.IntN(len(locks))
				r.Unlock(locks[i].node, float64(step))
				locks = append(locks[:i], locks[i+1:]...)
			default:
				before := r.Tokens()
				freed := r.Evict(int64(rng.IntN(40)))
				if r.Tokens() != before-freed {
					t.Fatalf("seed %d: evict freed %d but tokens went %d→%d", seed, freed, before, r.Tokens())
				}
			}
			checkRadix(t, r)
		}
	}
}

// TestMatchNeverExceedsPrompt: a prompt ending in a partial block that the
// tree holds full matches only the prompt's own tokens.
func TestMatchNeverExceedsPrompt(t *testing.T) {
	r := New(8)
	full := seq(1, 3) // 24 tokens, all blocks full
	m := r.Lock(full, 8, 0)
	n, _ := r.Insert(m.Node, full, 0, 8, 0)
	r.Unlock(n, 0)
	for _, c := range []struct {
		blocks []uint64
		last   int64
		want   int64
	}{
		{seq(1, 2), 3, 11}, // ends mid-edge on a full block
		{seq(1, 3), 3, 19}, // ends at the edge's end on a full block
		{seq(1, 3), 8, 24},
	} {
		if got := r.Match(c.blocks, c.last); got.Tokens != c.want {
			t.Errorf("Match(%v, last %d) = %d tokens, want %d", c.blocks, c.last, got.Tokens, c.want)
		}
	}
}

// A prompt that ends on a block the tree holds partly, with more tokens
// there, matches the partial block whole and must grow it on insert: the
// request computed those tokens, and the next prompt with the same tail
// should find them.
func TestPartialLastBlockGrows(t *testing.T) {
	r := New(16)
	a := seq(1, 3) // 2 full blocks + 5 tokens
	m := r.Lock(a, 5, 0)
	n, _ := r.Insert(m.Node, a, m.Blocks, 5, 0)
	r.Unlock(n, 0)
	// Same blocks, 12 tokens in the last one.
	m = r.Lock(a, 12, 1)
	if m.Blocks != 3 || m.Tokens != 37 {
		t.Fatalf("match = %+v, want 3 blocks / 37 tokens", m)
	}
	n, adopted := r.Insert(m.Node, a, m.Blocks, 12, 1)
	if adopted != 7 || r.Tokens() != 44 {
		t.Fatalf("adopted %d, tree %d; want 7 and 44", adopted, r.Tokens())
	}
	r.Unlock(n, 1)
	if got := r.Match(a, 12); got.Tokens != 44 {
		t.Fatalf("rematch = %+v, want 44 tokens", got)
	}
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
}

// EvictPath frees a path up to the first shared or referenced ancestor.
func TestEvictPath(t *testing.T) {
	r := New(16)
	shared := seq(1, 4)
	a := append(append([]uint64(nil), shared...), 10, 11)
	b := append(append([]uint64(nil), shared...), 20)
	for _, bl := range [][]uint64{a, b} {
		m := r.Lock(bl, 16, 0)
		n, _ := r.Insert(m.Node, bl, m.Blocks, 16, 0)
		r.Unlock(n, 0)
	}
	m := r.Match(a, 16)
	if freed := r.EvictPath(m.Node); freed != 32 {
		t.Fatalf("freed %d tokens, want a's own 2 blocks (32)", freed)
	}
	if got := r.Match(b, 16); got.Blocks != 5 {
		t.Fatalf("b lost blocks: %+v", got)
	}
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
}

// Nibble cuts the least recently used leaf from its end instead of freeing
// it whole.
func TestNibble(t *testing.T) {
	r := New(16)
	a := seq(1, 10) // 9 full blocks + 5 tokens
	m := r.Lock(a, 5, 0)
	n, _ := r.Insert(m.Node, a, 0, 5, 0)
	r.Unlock(n, 0)
	if freed := r.Nibble(20); freed != 5+16 {
		t.Fatalf("freed %d, want the partial block and one full block (21)", freed)
	}
	if got := r.Match(a[:8], 16); got.Blocks != 8 || got.Tokens != 128 {
		t.Fatalf("after nibbling: %+v, want the first 8 blocks kept", got)
	}
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
}

// Demote sends a path's own blocks to the front of the LRU order; a prefix
// another path shares keeps its place.
func TestDemote(t *testing.T) {
	r := New(16)
	shared := seq(1, 4)
	a := append(append([]uint64(nil), shared...), 10, 11) // older
	b := append(append([]uint64(nil), shared...), 20, 21) // newer, demoted
	var nb int32
	for i, bl := range [][]uint64{a, b} {
		m := r.Lock(bl, 16, float64(i))
		n, _ := r.Insert(m.Node, bl, m.Blocks, 16, float64(i))
		r.Unlock(n, float64(i))
		nb = n
	}
	r.Demote(nb, 1e9)
	if freed := r.Evict(1); freed != 32 {
		t.Fatalf("freed %d tokens first, want b's own 2 blocks", freed)
	}
	if got := r.Match(a, 16); got.Blocks != 6 {
		t.Fatalf("a lost blocks before demoted b: %+v", got)
	}
	if got := r.Match(b, 16); got.Blocks != 4 {
		t.Fatalf("b kept %d blocks, want the shared 4", got.Blocks)
	}
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
}

// commonPrefix against the plain loop on every split point of runs longer
// and shorter than its 64-block stride.
func TestCommonPrefix(t *testing.T) {
	plain := func(a, b []uint64) int {
		k := 0
		for k < len(a) && k < len(b) && a[k] == b[k] {
			k++
		}
		return k
	}
	for _, n := range []int{0, 1, 63, 64, 65, 130, 200} {
		a := make([]uint64, n)
		for i := range a {
			a[i] = uint64(i)*2654435761 + 7
		}
		for cut := 0; cut <= n; cut++ {
			for _, m := range []int{cut, n, n + 70} {
				b := make([]uint64, m)
				copy(b, a)
				for i := cut; i < m; i++ {
					b[i] = ^uint64(i) // differs from a from cut on
				}
				if got, want := CommonPrefix(a, b), plain(a, b); got != want {
					t.Fatalf("n %d, b %d long differing from %d: commonPrefix %d, want %d", n, m, cut, got, want)
				}
				if got, want := CommonPrefix(b, a), plain(b, a); got != want {
					t.Fatalf("n %d, b %d long differing from %d (swapped): commonPrefix %d, want %d", n, m, cut, got, want)
				}
			}
		}
	}
}

// Version changes with what the tree holds (an insert, a grown partial
// block, an eviction, a nibble) and not with lookups, locks or unlocks, so
// a Match taken at one version still holds while it is the same.
func TestVersionFollowsContent(t *testing.T) {
	r := New(16)
	v := r.Version()
	same := func(what string) {
		t.Helper()
		if r.Version() != v {
			t.Fatalf("%s changed the version", what)
		}
	}
	moved := func(what string) {
		t.Helper()
		if r.Version() == v {
			t.Fatalf("%s left the version as it was", what)
		}
		v = r.Version()
	}
	m := r.Lock(seq(1, 8), 10, 1)
	same("a lock on an empty tree")
	n, _ := r.Insert(m.Node, seq(1, 8), m.Blocks, 10, 1)
	moved("an insert")
	r.Unlock(n, 2)
	r.Match(seq(1, 4), 16)
	same("an unlock and a match")
	m = r.Lock(seq(1, 8), 16, 3) // the partial last block fills
	same("a lock that splits nothing")
	n, _ = r.Insert(m.Node, seq(1, 8), m.Blocks, 16, 3)
	moved("a grown partial block")
	r.Unlock(n, 4)
	m = r.Lock(seq(1, 4), 16, 5) // splits the edge
	r.Unlock(m.Node, 5)
	same("a lock that split an edge")
	r.Nibble(16)
	moved("a nibble")
	r.Evict(1 << 20)
	moved("an eviction")
}
