package engine

// The order trims take pinned sessions in: least recently used first, ties
// by id. trimVictim scanned every pinned session for the oldest at every
// trim, and a decoder pins every session whose turn ended there: with
// one-turn sessions (100K short requests on KVC v3 1P7D) that scan was
// 41 % of the run. A min-heap of (lastUse, id) entries finds it in
// O(log sessions); an entry goes stale when its session is used again or
// unpinned (its stamp moves), and stale entries are skipped or compacted
// away.

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
	if len(w.trimOrder) > 64 && len(w.trimOrder) > 4*w.nPinned {
		w.schedWork += uint64(len(w.trimOrder))
		kept := w.trimOrder[:0]
		for _, e := range w.trimOrder {
			if e.live() {
				kept = append(kept, e)
			}
		}
		clear(w.trimOrder[len(kept):])
		w.trimOrder = kept
		w.trimOrder.init()
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
	for len(*h) > 0 && seen < window {
		w.schedWork++
		e := (*h)[0]
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
	for _, e := range aside {
		h.push(e)
	}
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
