package synth

// idAlloc hands out fresh hash ids. One counter per stream makes every
// session-private block globally unique while keeping ids small (short JSON
// lines); the low ids are reserved for the shared prefixes so that those are
// the same numbers in every session.
type idAlloc struct{ next uint64 }

// take reserves n consecutive ids and returns the first.
func (a *idAlloc) take(n int) uint64 {
	first := a.next
	a.next += uint64(n)
	return first
}

// run is a stretch of consecutive ids at consecutive block positions.
type run struct {
	first uint64
	n     int
}

// blockChain is the hash-id state of one session's context. The context is
// append-only between compactions, so its full blocks keep their ids from turn
// to turn; only the last, partial block is re-identified when it fills up
// (its content changed). Storing the ids as runs — one per turn that added
// blocks — keeps a session's state at O(turns) words instead of O(context).
type blockChain struct {
	bs          int
	prefixBase  uint64 // id of the first shared-prefix block
	prefixFull  int    // shared-prefix blocks: the prefix's whole blocks only
	runs        []run  // session-private full blocks after the prefix, in order
	full        int    // full blocks in the context, prefix included
	tokens      int    // context length in tokens
	partial     uint64 // id of the partial last block when tokens%bs != 0
	partialNext bool   // tokens%bs != 0
}

// reset starts a new context that holds only the shared prefix's whole
// blocks: used at session start and at compaction, where everything after
// the system/tool prefix is rewritten.
func (c *blockChain) reset(bs int, prefixBase uint64, prefixTokens int) {
	c.bs = bs
	c.prefixBase = prefixBase
	c.prefixFull = prefixTokens / bs
	c.runs = c.runs[:0]
	c.full = c.prefixFull
	c.tokens = c.prefixFull * bs
	c.partialNext = false
}

// grow extends the context to n tokens (n >= current length), drawing ids for
// the new blocks — and a new id for the formerly partial block — from a.
func (c *blockChain) grow(n int, a *idAlloc) {
	if n <= c.tokens {
		return
	}
	newFull := n / c.bs
	added := newFull - c.full // blocks that become full now
	part := n%c.bs != 0
	k := added
	if part {
		k++
	}
	first := a.take(k)
	if added > 0 {
		if m := len(c.runs); m > 0 && c.runs[m-1].first+uint64(c.runs[m-1].n) == first {
			c.runs[m-1].n += added
		} else {
			c.runs = append(c.runs, run{first, added})
		}
	}
	c.full = newFull
	c.tokens = n
	c.partialNext = part
	if part {
		c.partial = first + uint64(added)
	}
}

// fill writes the context's ids into dst, reusing its capacity.
func (c *blockChain) fill(dst []uint64) []uint64 {
	n := c.full
	if c.partialNext {
		n++
	}
	if cap(dst) < n {
		dst = make([]uint64, n, n+n/4)
	}
	dst = dst[:n]
	k := 0
	for i := range c.prefixFull {
		dst[k] = c.prefixBase + uint64(i)
		k++
	}
	for _, r := range c.runs {
		seg := dst[k : k+r.n]
		for i := range seg {
			seg[i] = r.first + uint64(i)
		}
		k += r.n
	}
	if c.partialNext {
		dst[k] = c.partial
	}
	return dst
}
