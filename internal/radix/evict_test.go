package radix

import "testing"

// put inserts blocks (lastTokens in the last block) at time now and
// unlocks them, returning the path's deepest node.
func put(r *Tree, blocks []uint64, lastTokens int64, now float64) int32 {
	m := r.Lock(blocks, lastTokens, now)
	n, _ := r.Insert(m.Node, blocks, m.Blocks, lastTokens, now)
	r.Unlock(n, now)
	return n
}

// Evict stops as soon as it has freed what was asked: a need equal to the
// least recently used leaf's tokens frees that leaf only.
func TestEvictFreesOnlyWhatIsNeeded(t *testing.T) {
	r := New(16)
	put(r, seq(1, 2), 16, 0)
	put(r, seq(10, 2), 16, 1)
	if freed := r.Evict(32); freed != 32 {
		t.Fatalf("Evict(32) freed %d, want the older leaf's 32", freed)
	}
	if r.Tokens() != 32 {
		t.Fatalf("tree holds %d tokens, want the newer leaf's 32", r.Tokens())
	}
	if got := r.Match(seq(10, 2), 16); got.Blocks != 2 {
		t.Fatalf("newer leaf lost blocks: %+v", got)
	}
	checkRadix(t, r)
}

// NibbleOne on one leaf, exactly: what it frees, what of the leaf is left
// (blocks and tokens a longer prompt over it matches) and the tree's
// total. Block size 16.
func TestNibbleOneExact(t *testing.T) {
	for _, c := range []struct {
		name       string
		blocks     int
		last       int64 // tokens in the leaf's last block
		need       int64
		freed      int64
		keptBlocks int
		keptTokens int64
	}{
		{"nothing needed, partial leaf", 4, 5, 0, 0, 3, 48},
		{"nothing needed, one block", 1, 16, 0, 0, 1, 16},
		{"need equals the leaf", 2, 16, 32, 32, 0, 0},
		{"one block leaf, need less", 1, 16, 5, 16, 0, 0},
		{"need one full block", 4, 16, 16, 16, 3, 48},
		{"need the partial block", 4, 5, 5, 5, 3, 48},
		{"need past the partial block", 4, 5, 6, 21, 2, 32},
		{"need all but one block", 4, 16, 48, 48, 1, 16},
		{"need more than all but one", 4, 16, 50, 48, 1, 16},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := New(16)
			b := seq(1, c.blocks)
			put(r, b, c.last, 0)
			before := r.Tokens()
			if freed := r.NibbleOne(c.need); freed != c.freed {
				t.Fatalf("NibbleOne(%d) freed %d, want %d", c.need, freed, c.freed)
			}
			if r.Tokens() != before-c.freed {
				t.Fatalf("tree went %d→%d tokens, freed %d", before, r.Tokens(), c.freed)
			}
			// A prompt one block longer: it matches a partial last block
			// only as far as its full blocks.
			if got := r.Match(seq(1, c.blocks+1), 16); got.Blocks != c.keptBlocks || got.Tokens != c.keptTokens {
				t.Fatalf("kept %d blocks / %d tokens, want %d / %d", got.Blocks, got.Tokens, c.keptBlocks, c.keptTokens)
			}
			checkRadix(t, r)
		})
	}
}

// Nibble asks each step only for what is still needed: after the oldest
// leaf goes whole, the next leaf loses one block, not all of it.
func TestNibbleNeedShrinks(t *testing.T) {
	r := New(16)
	put(r, seq(1, 2), 16, 0)  // 32 tokens, oldest
	put(r, seq(10, 4), 16, 1) // 64 tokens
	if freed := r.Nibble(40); freed != 48 {
		t.Fatalf("Nibble(40) freed %d, want 32 + one block of 16", freed)
	}
	if got := r.Match(seq(10, 4), 16); got.Blocks != 3 || got.Tokens != 48 {
		t.Fatalf("newer leaf kept %+v, want 3 blocks / 48 tokens", got)
	}
	checkRadix(t, r)
}

// Demote goes up through ancestors that only the demoted path uses: once
// the leaf is evicted, its parent (one child, unreferenced) goes before an
// older untouched path.
func TestDemoteOwnAncestors(t *testing.T) {
	r := New(16)
	put(r, seq(100, 2), 16, 0) // older, other branch
	put(r, seq(1, 4), 16, 1)   // upper node of the demoted path
	leaf := put(r, append(seq(1, 4), 10, 11), 16, 2)
	r.Demote(leaf, 1e9)
	if freed := r.Evict(1); freed != 32 {
		t.Fatalf("first eviction freed %d, want the demoted leaf's 32", freed)
	}
	if freed := r.Evict(1); freed != 64 {
		t.Fatalf("second eviction freed %d, want the demoted parent's 64", freed)
	}
	if got := r.Match(seq(100, 2), 16); got.Blocks != 2 {
		t.Fatalf("older undemoted path lost blocks: %+v", got)
	}
	checkRadix(t, r)
}

// A handle frees its node's path while the node lives, and nothing once it
// was freed, even when its slot holds a new node; a handle past the tree's
// slots frees nothing.
func TestEvictHandle(t *testing.T) {
	r := New(16)
	a := put(r, seq(1, 2), 16, 0)
	h := r.HandleOf(a)
	if freed := r.EvictHandle(Handle{node: int32(len(r.nodes))}); freed != 0 {
		t.Fatalf("out-of-range handle freed %d", freed)
	}
	if freed := r.EvictHandle(h); freed != 32 {
		t.Fatalf("live handle freed %d, want 32", freed)
	}
	b := put(r, seq(10, 3), 16, 1)
	if b != a {
		t.Fatalf("new node took slot %d, want the freed slot %d", b, a)
	}
	if freed := r.EvictHandle(h); freed != 0 {
		t.Fatalf("stale handle freed %d of the slot's new node", freed)
	}
	if r.Tokens() != 48 {
		t.Fatalf("tree holds %d tokens, want the new node's 48", r.Tokens())
	}
	if freed := r.EvictHandle(r.HandleOf(b)); freed != 48 {
		t.Fatalf("the new node's handle freed %d, want 48", freed)
	}
	checkRadix(t, r)
}

// Leaves released at the same time are evicted in release order, whichever
// that is.
func TestEqualAccessEvictsInUnlockOrder(t *testing.T) {
	for _, first := range []int{0, 1} {
		r := New(16)
		paths := [][]uint64{seq(1, 2), seq(10, 3)}
		var nodes [2]int32
		for i, p := range paths {
			m := r.Lock(p, 16, 0)
			nodes[i], _ = r.Insert(m.Node, p, 0, 16, 0)
		}
		r.Unlock(nodes[first], 5)
		r.Unlock(nodes[1-first], 5)
		want := int64(len(paths[first])) * 16
		if freed := r.Evict(1); freed != want {
			t.Fatalf("unlocked %d first: evicted %d tokens, want its %d", first, freed, want)
		}
	}
}
