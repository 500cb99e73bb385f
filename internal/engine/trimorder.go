package engine

// The order trims take pinned sessions in: least recently used first, ties
// by id. trimVictim scanned every pinned session for the oldest at every
// trim, and a decoder pins every session whose turn ended there: with
// one-turn sessions (100K short requests on KVC v3 1P7D) that scan was
// 41 % of the run. A min-heap of (lastUse, id) entries finds it in
// O(log sessions); an entry goes stale when its session is used again or
// unpinned (its stamp moves), and stale entries are skipped or compacted
// away.
//
// Nearly every entry is filed at the worker's current time (a session's
// request starts or ends now), so the entries arrive in order: they go to
// a queue, oldest first (an entry that ties in time with the last few and
// has a smaller id slides in among them), and only an entry older than
// those (a repin at an old last use) goes to the heap. The oldest entry is the older of the queue's head and the
// heap's top: the same entries come out in the same order as from one
// heap, and a trim pops from the queue's head in O(1), where a heap pop
// sifted through log n cache lines (2.6 % of a 100K v3 1P7D run).

// trimOrder is the pinned sessions' entries: a queue in order and a heap
// of those that came out of order.
type trimOrder struct {
	run  []trimEntry // in (lastUse, id) order from run[head]
	head int
	heap trimHeap
}

func (o *trimOrder) len() int { return len(o.run) - o.head + len(o.heap) }

// trimSlide is how far back from the queue's tail an entry may be placed
// (sessions ending in one step share a time and go by id): further back,
// it goes to the heap.
const trimSlide = 8

// push files e in the queue when it is not older than the entry trimSlide
// places from its tail, else in the heap.
func (o *trimOrder) push(e trimEntry) {
	n := len(o.run)
	j := n
	for j > o.head && n-j < trimSlide && e.before(&o.run[j-1]) {
		j--
	}
	if j > o.head && e.before(&o.run[j-1]) {
		o.heap.push(e)
		return
	}
	if o.head > 0 && o.head >= n/2 && n == cap(o.run) {
		// Room at the front: move the queue down rather than grow it.
		k := copy(o.run, o.run[o.head:])
		clear(o.run[k:n])
		j -= o.head
		o.run, o.head = o.run[:k], 0
		n = k
	}
	o.run = append(o.run, e)
	copy(o.run[j+1:], o.run[j:n])
	o.run[j] = e
}

// top is the oldest entry; the order must not be empty.
func (o *trimOrder) top() *trimEntry {
	if o.head == len(o.run) || len(o.heap) > 0 && o.heap[0].before(&o.run[o.head]) {
		return &o.heap[0]
	}
	return &o.run[o.head]
}

// pop takes the oldest entry out; the order must not be empty.
func (o *trimOrder) pop() trimEntry {
	if o.head == len(o.run) || len(o.heap) > 0 && o.heap[0].before(&o.run[o.head]) {
		return o.heap.pop()
	}
	e := o.run[o.head]
	o.run[o.head] = trimEntry{}
	if o.head++; o.head == len(o.run) {
		o.run, o.head = o.run[:0], 0
	}
	return e
}

// putBack returns entries a trim looked at and passed over, as pop gave
// them (oldest first): each is no newer than anything left, so they go
// back to the queue's front while it has room there.
func (o *trimOrder) putBack(aside []trimEntry) {
	for i := len(aside) - 1; i >= 0; i-- {
		if o.head > 0 {
			o.head--
			o.run[o.head] = aside[i]
		} else {
			o.heap.push(aside[i])
		}
	}
}

// compact drops the stale entries, keeping the queue's order.
func (o *trimOrder) compact() {
	kept := o.run[:0]
	for _, e := range o.run[o.head:] {
		if e.live() {
			kept = append(kept, e)
		}
	}
	clear(o.run[len(kept):])
	o.run, o.head = kept, 0
	h := o.heap[:0]
	for _, e := range o.heap {
		if e.live() {
			h = append(h, e)
		}
	}
	clear(o.heap[len(h):])
	o.heap = h
	o.heap.init()
}

type trimEntry struct {
	lastUse float64
	s       *dSession
	stamp   uint32
}

type trimHeap []trimEntry

func (e *trimEntry) before(o *trimEntry) bool {
	if e.lastUse != o.lastUse {
		return e.lastUse < o.lastUse
	}
	return e.s.id < o.s.id
}

func (e *trimEntry) live() bool { return e.s.pinned && e.s.trimStamp == e.stamp }

// sessionMoved notes that s changed its pin or its last use: a pinned
// session gets a fresh entry in the trim order.
func (w *Worker) sessionMoved(s *dSession) {
	s.trimStamp++
	if !s.pinned {
		return
	}
	w.trimOrder.push(trimEntry{lastUse: s.lastUse, s: s, stamp: s.trimStamp})
	if n := w.trimOrder.len(); n > 64 && n > 4*w.nPinned {
		w.schedWork += uint64(n)
		w.trimOrder.compact()
	}
}

// TrimHostWindow is how many of the least recently used trimmable
// sessions a host-aware trim (HiCacheConfig.TrimHostFirst) looks at for
// one the host tier holds: a bounded look-ahead keeps a trim O(log n)
// (the reason the order is a heap), and a session far down the LRU order
// is not taken for a small saving.
const TrimHostWindow = 8

// oldestPinned is the least recently used pinned session other than
// except that a trim may take (TrimIdle: none with a request here); with
// a host-aware trim, the oldest of the TrimHostWindow least recently used
// that the host tier holds, if any.
func (w *Worker) oldestPinned(except string) *dSession {
	h := &w.trimOrder
	aside := w.trimAside[:0]
	var victim *dSession
	window := 1
	if w.host != nil && w.host.hostTrim {
		window = TrimHostWindow
	}
	seen := 0
	for h.len() > 0 && seen < window {
		w.schedWork++
		e := h.top()
		if !e.live() {
			h.pop()
			continue
		}
		if e.s.id == except || (e.s.inflight > 0 && w.cfg.Session.Trim == TrimIdle) {
			aside = append(aside, h.pop())
			continue
		}
		if seen == 0 {
			victim = e.s // LRU: taken when no candidate is on host
		}
		seen++
		if window == 1 || w.hostHolds(e.s) {
			victim = e.s
			break
		}
		aside = append(aside, h.pop())
	}
	h.putBack(aside)
	clear(aside)
	w.trimAside = aside[:0]
	return victim
}

func (h *trimHeap) push(e trimEntry) {
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

func (h *trimHeap) pop() trimEntry {
	q := *h
	top := q[0]
	n := len(q) - 1
	last := q[n]
	q[n] = trimEntry{}
	q = q[:n]
	*h = q
	if n > 0 {
		q.down(0, last)
	}
	return top
}

func (h trimHeap) down(i int, e trimEntry) {
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

func (h trimHeap) init() {
	for i := len(h)/2 - 1; i >= 0; i-- {
		h.down(i, h[i])
	}
}

// hostHolds reports whether the host tier holds session s's whole pinned
// path (hicache.go), so trimming it from HBM loses nothing a load-back
// cannot bring back.
func (w *Worker) hostHolds(s *dSession) bool {
	blocks, tokens := w.tree.PathBlocks(s.node)
	if len(blocks) == 0 {
		return false
	}
	last := tokens - int64(len(blocks)-1)*int64(w.cfg.BlockSize)
	return w.host.tree.Match(blocks, last).Tokens == tokens
}
