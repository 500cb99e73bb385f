package kvc

// A dispatch's picks: the routers' choices for its prompt, with the
// prompt's overlaps remembered between them.

// overlaps keeps one prompt's overlap with each worker's index while that
// index is unchanged. A dispatch scores the same prompt again after every
// refused admission and once more for its fallback; on an overloaded
// cluster nearly every request is refused three times, and those repeated
// walks of the indexes were a tenth of a KVC simulation's time.
type overlaps struct {
	// per worker i: at 2i the index version the overlap was computed at (0:
	// none), at 2i+1 the overlap; sized with its sibling by sizeMemos
	vals []uint64
}

// sizeMemos gives a KVC dispatch's two memos their room in one allocation:
// each grew its own on first use, two allocations a request, a tenth of
// KVC v3's on one-turn sessions. The decoders' part is capped at its
// length, so a router grown at run time (pool.go) moves it to an array of
// its own instead of writing over the prefill workers' part. Dispatches of
// the other mechanisms, which never score an index, keep none.
func (t *Dispatch) sizeMemos() {
	nd, np := 0, 0
	if x := t.x.d; x != nil && x.index != nil {
		nd = 2 * len(x.index)
	}
	if x := t.x.p; x != nil && x.index != nil {
		np = 2 * len(x.index)
	}
	if nd == 0 || np == 0 || t.dOv.vals != nil || t.pOv.vals != nil {
		return
	}
	buf := t.memo
	if cap(buf) >= nd+np { // a recycled dispatch's (Recycle): as new once zeroed
		buf = buf[:nd+np]
		clear(buf)
	} else {
		buf = make([]uint64, nd+np)
		t.memo = buf
	}
	t.dOv.vals, t.pOv.vals = buf[:nd:nd], buf[nd:nd+np:nd+np]
}

// overlap is the prefix of blocks that worker i's index holds, from m when
// it still holds (m may be nil).
func (r *Router) overlap(m *overlaps, i int, blocks []uint64) int {
	if r.roots != nil && len(blocks) > 0 && r.rootMask(blocks[0])>>uint(i)&1 == 0 {
		return 0 // no edge of index i starts with the prompt's first block
	}
	x := r.index[i]
	if m == nil {
		return x.prefix(blocks)
	}
	if len(m.vals) < 2*len(r.index) {
		m.vals = append(m.vals, make([]uint64, 2*len(r.index)-len(m.vals))...)
	}
	if m.vals[2*i] != x.ver {
		m.vals[2*i], m.vals[2*i+1] = x.ver, uint64(x.prefix(blocks))
	}
	return int(m.vals[2*i+1])
}

// pickD and pickPAmong are the routers' picks for this request's prompt,
// remembering its overlaps for the next pick (overlaps).
func (t *Dispatch) pickD(key SessionKey, allowed func(int) bool) Decision {
	return t.x.d.pickAmong(&t.dOv, key, t.r.Blocks, allowed)
}

// prefillWorker is P's router's pick for the prompt, −1 when none.
func (t *Dispatch) prefillWorker() int { return t.x.p.pickWorker(&t.pOv, t.r.key(), t.r.Blocks) }

// pickWorker is pick's worker alone. With a single worker in service there
// is nothing to score, so no index is walked for an overlap nobody reads.
func (r *Router) pickWorker(m *overlaps, session SessionKey, blocks []uint64) int {
	if len(r.names) == 1 && r.nOut == 0 {
		return 0
	}
	return r.pick(m, session, blocks).Worker
}

func (t *Dispatch) pickPAmong(allowed func(int) bool) Decision {
	return t.x.p.pickAmong(&t.pOv, t.r.key(), t.r.Blocks, allowed)
}
