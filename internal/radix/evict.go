package radix

// Freeing KV: whole leaves least recently used first (Evict), block by block
// (Nibble), a session's path at once (EvictPath, by handle), and demoting a
// path to the front of the eviction order.

// Evict frees unreferenced leaves, least recently used first, until at least
// need tokens are freed or nothing evictable remains. It returns the tokens
// freed.
func (r *Tree) Evict(need int64) int64 {
	var freed int64
	for freed < need && len(r.lru) > 0 {
		e := r.lru.pop()
		n := &r.nodes[e.node]
		if !n.live || n.ver != e.ver || n.ref != 0 || n.kid != 0 {
			continue // stale entry
		}
		tok, parent := r.freeNode(e.node)
		freed += tok
		if r.spool {
			freed += r.dropTombstones(parent)
		} else if parent != root && r.nodes[parent].ref == 0 {
			r.pushIfLeaf(parent)
		}
	}
	return freed
}

// Nibble frees at least need tokens like Evict, but block by block: when
// the least recently used leaf holds more than is still needed, only its
// last blocks go and the leaf stays, shorter. It is block-granular eviction
// (a session whose tail was nibbled re-prefills only what it lost). It
// returns the tokens freed.
func (r *Tree) Nibble(need int64) int64 {
	var freed int64
	for freed < need {
		f := r.NibbleOne(need - freed)
		if f == 0 {
			break
		}
		freed += f
	}
	return freed
}

// NibbleOne is one step of Nibble: it frees what is needed of the least
// recently used leaf only (its last blocks, or all of it), so an owner that
// keeps other evictable KV beside the tree can compare ages between steps.
func (r *Tree) NibbleOne(need int64) int64 {
	if _, ok := r.OldestAccess(); !ok || need <= 0 {
		return 0
	}
	n := &r.nodes[r.lru[0].node]
	if n.tokens <= need || len(n.key) <= 1 {
		return r.Evict(1)
	}
	var cut int64
	k := 0
	for cut < need && k < len(n.key)-1 {
		if k == 0 && n.partial > 0 {
			cut += n.partial
		} else {
			cut += r.blockSize
		}
		k++
	}
	r.touch(n.parent, n.key[0])
	n.key = n.key[:len(n.key)-k]
	n.tokens -= cut
	r.slideGrow(n, -cut)
	n.partial = 0
	r.tokens -= cut
	r.ver++
	r.evictable -= cut
	return cut
}

// EvictPath frees node n and then its ancestors, as long as each is
// unreferenced and has no other children: the blocks only this path held.
// It is how a session-granular cache frees a session's tail at once, and
// how a router forgets what a worker reported evicted. It returns the tokens
// freed.
func (r *Tree) EvictPath(n int32) int64 {
	var freed int64
	for n != root {
		nd := &r.nodes[n]
		if !nd.live || nd.ref != 0 || nd.kid != 0 {
			break
		}
		tok, parent := r.freeNode(n)
		freed += tok
		n = parent
	}
	if n != root {
		r.pushIfLeaf(n)
	}
	return freed
}

// Handle names a node across later changes to the tree: it goes stale
// when the node is freed, so an owner can keep one without a reference.
type Handle struct {
	node int32
	gen  uint32
}

// HandleOf returns a handle on node n (as Lock, Insert or Match return it).
func (r *Tree) HandleOf(n int32) Handle { return Handle{node: n, gen: r.nodes[n].gen} }

// EvictHandle is EvictPath on the node h names, if it still exists.
func (r *Tree) EvictHandle(h Handle) int64 {
	if h.node <= root || int(h.node) >= len(r.nodes) {
		return 0
	}
	if n := &r.nodes[h.node]; !n.live || n.gen != h.gen {
		return 0
	}
	return r.EvictPath(h.node)
}

// Demote moves node n, and the ancestors only its path uses (unreferenced,
// no other child), back by age seconds in the least-recently-used order:
// a two-class priority eviction (SGLang's --radix-eviction-policy priority
// with two levels) in which demoted KV goes before any other, in LRU order
// among itself. Nodes others use keep their place.
func (r *Tree) Demote(n int32, age float64) {
	for first := true; n > root; n = r.nodes[n].parent {
		nd := &r.nodes[n]
		if nd.ref != 0 || r.manyKids(n) || (first && r.hasKids(n)) {
			return
		}
		nd.access -= age
		r.pushIfLeaf(n)
		first = false
	}
}

// OldestAccess is the last-use time of the leaf Evict would free first; ok
// is false when nothing is evictable. Owners that keep other evictable KV
// beside the tree use it to evict in one LRU order.
func (r *Tree) OldestAccess() (t float64, ok bool) {
	for len(r.lru) > 0 {
		e := r.lru[0]
		n := &r.nodes[e.node]
		if n.live && n.ver == e.ver && n.ref == 0 && n.kid == 0 {
			return e.access, true
		}
		r.lru.pop() // stale
	}
	return 0, false
}

// freeNode frees node i, an unreferenced leaf: its tokens leave the tree
// and its slot goes back for reuse. It returns the tokens and the parent.
func (r *Tree) freeNode(i int32) (int64, int32) {
	n := &r.nodes[i]
	tok, parent := n.tokens, n.parent
	r.slideGrow(n, -tok)
	r.tokens -= tok
	r.ver++
	r.evictable -= tok
	r.touch(parent, n.key[0])
	first := n.key[0]
	r.unlink(i)
	if parent == root && r.rootWatch != nil {
		r.rootWatch(first, false)
	}
	*n = node{ver: n.ver + 1, gen: n.gen + 1, sver: n.sver + 1}
	r.free = append(r.free, i)
	return tok, parent
}
