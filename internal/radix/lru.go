package radix

// The tree's eviction order: its unreferenced leaves, least recently used
// first.

func (r *Tree) pushIfLeaf(n int32) {
	nd := &r.nodes[n]
	if n == root || nd.ref != 0 || nd.kid != 0 {
		return
	}
	nd.ver++
	r.seq++
	r.lru.push(lruEntry{access: nd.access, seq: r.seq, node: n, ver: nd.ver})
	if len(r.lru) > 1024 && len(r.lru) > 4*(len(r.nodes)-len(r.free)) {
		r.compactLRU()
	}
}

// compactLRU drops stale heap entries so the heap's size follows the tree's,
// not the number of unlocks over a run.
func (r *Tree) compactLRU() {
	kept := r.lru[:0]
	for _, e := range r.lru {
		n := &r.nodes[e.node]
		if n.live && n.ver == e.ver && n.ref == 0 && n.kid == 0 {
			kept = append(kept, e)
		}
	}
	r.lru = kept
	r.lru.init()
}

type lruEntry struct {
	access float64
	seq    uint64
	node   int32
	ver    uint32
}

// lruHeap is a min-heap of unreferenced leaves by (access, seq), typed so
// that a push or pop does not box its entry (container/heap allocated on
// every one: a seventh of a KVC simulation's allocations). Entries go stale
// when their node changes (ver); the readers skip them.
type lruHeap []lruEntry

func (e *lruEntry) before(o *lruEntry) bool {
	if e.access != o.access {
		return e.access < o.access
	}
	return e.seq < o.seq
}

func (h *lruHeap) push(e lruEntry) {
	*h = append(*h, e)
	q := *h
	i := len(q) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !e.before(&q[p]) {
			break
		}
		q[i] = q[p]
		i = p
	}
	q[i] = e
}

func (h *lruHeap) pop() lruEntry {
	q := *h
	top := q[0]
	n := len(q) - 1
	last := q[n]
	q = q[:n]
	*h = q
	if n > 0 {
		q.down(0, last)
	}
	return top
}

// down places e at hole i, moving smaller children up.
func (h lruHeap) down(i int, e lruEntry) {
	n := len(h)
	for {
		m := 2*i + 1
		if m >= n {
			break
		}
		if r := m + 1; r < n && h[r].before(&h[m]) {
			m = r
		}
		if !h[m].before(&e) {
			break
		}
		h[i] = h[m]
		i = m
	}
	h[i] = e
}

// init restores the heap order of any slice.
func (h lruHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i, h[i])
	}
}
