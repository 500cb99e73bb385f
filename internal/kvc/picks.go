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
	// none), at 2i+1 the overlap; in small for up to eight workers (no
	// allocation a dispatch: two a request were a tenth of KVC v3's
	// allocations on one-turn sessions), else in vals
	small [16]uint64
	vals  []uint64
}

// slots is m's 2n values: small while they fit and vals was never needed,
// else vals, grown to 2n with what small held carried over. It keeps no
// pointer into m itself, so a copied Dispatch keeps its own memo.
func (m *overlaps) slots(n int) []uint64 {
	if m.vals == nil {
		if 2*n <= len(m.small) {
			return m.small[:2*n]
		}
		m.vals = make([]uint64, 2*n)
		copy(m.vals, m.small[:])
	}
	if len(m.vals) < 2*n {
		m.vals = append(m.vals, make([]uint64, 2*n-len(m.vals))...)
	}
	return m.vals
}

// overlap is the prefix of blocks that worker i's index holds, from m when
// it still holds (m may be nil).
func (r *Router) overlap(m *overlaps, i int, blocks []uint64) int {
	x := r.index[i]
	if m == nil {
		return x.prefix(blocks)
	}
	vals := m.slots(len(r.index))
	if vals[2*i] != x.ver {
		vals[2*i], vals[2*i+1] = x.ver, uint64(x.prefix(blocks))
	}
	return int(vals[2*i+1])
}

// pickD and pickPAmong are the routers' picks for this request's prompt,
// remembering its overlaps for the next pick (overlaps).
func (t *Dispatch) pickD(key string, allowed func(int) bool) Decision {
	return t.x.d.pickAmong(&t.dOv, key, t.r.Blocks, allowed)
}

// prefillWorker is P's router's pick for the prompt, −1 when none.
func (t *Dispatch) prefillWorker() int { return t.x.p.pickWorker(&t.pOv, t.r.Session, t.r.Blocks) }

// pickWorker is pick's worker alone. With a single worker in service there
// is nothing to score, so no index is walked for an overlap nobody reads.
func (r *Router) pickWorker(m *overlaps, session string, blocks []uint64) int {
	if len(r.names) == 1 && r.nOut == 0 {
		return 0
	}
	return r.pick(m, session, blocks).Worker
}

func (t *Dispatch) pickPAmong(allowed func(int) bool) Decision {
	return t.x.p.pickAmong(&t.pOv, t.r.Session, t.r.Blocks, allowed)
}
