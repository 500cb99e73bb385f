package radix

// The tree's eviction order: its unreferenced leaves, least recently used
// first.

func (r *Tree) pushIfLeaf(n int32) {
	nd := &r.nodes[n]
	if n == root || nd.ref != 0 || len(nd.children) != 0 {
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
		if n.live && n.ver == e.ver && n.ref == 0 && len(n.children) == 0 {
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
//
// It is 4-ary: a pop walks half the levels of a binary heap, and a node's
// four children sit in 96 contiguous bytes (one or two cache lines where a
// binary heap's next level is another miss). (access, seq) is a total order
// (seq is never reused), so the entries come out in the same order for any
// heap shape.
type lruHeap []lruEntry

const lruArity = 4

func (e *lruEntry) before(o *lruEntry) bool {
	if e.access != o.access {
		return e.access < o.access
	}
	return e.seq < o.seq
}

func (h *lruHeap) push(e lruEntry) {
	*h = append(*h, e)
	h.up(len(*h)-1, e)
}

// up places e at hole i, moving larger parents down.
func (h lruHeap) up(i int, e lruEntry) {
	for i > 0 {
		p := (i - 1) / lruArity
		if !e.before(&h[p]) {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = e
}

// pop takes the least entry out. The last entry, which refills the hole, is
// as a rule among the newest (leaves are pushed as they are released, in
// time order), so the hole is first carried down to a leaf along the least
// children without comparing it, and the last entry then climbs back up the
// few levels it must (Floyd's bottom-up deletion: a third fewer compares,
// and the same place down would have put it in).
func (h *lruHeap) pop() lruEntry {
	q := *h
	top := q[0]
	n := len(q) - 1
	last := q[n]
	q = q[:n]
	*h = q
	if n == 0 {
		return top
	}
	i := 0
	for {
		c := lruArity*i + 1
		if c >= n {
			break
		}
		m := c
		end := min(c+lruArity, n)
		for j := c + 1; j < end; j++ {
			if q[j].before(&q[m]) {
				m = j
			}
		}
		q[i] = q[m]
		i = m
	}
	q.up(i, last)
	return top
}

// down places e at hole i, moving smaller children up.
func (h lruHeap) down(i int, e lruEntry) {
	n := len(h)
	for {
		c := lruArity*i + 1
		if c >= n {
			break
		}
		m := c
		end := min(c+lruArity, n)
		for j := c + 1; j < end; j++ {
			if h[j].before(&h[m]) {
				m = j
			}
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
	for i := (len(h) - 2) / lruArity; i >= 0 && len(h) > 1; i-- {
		h.down(i, h[i])
	}
}
