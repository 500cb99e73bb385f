package engine

// Running requests that share a cached prefix share its blocks: in vLLM a
// prefix block is one block of the pool however many requests reference
// it, and a sliding layer's block behind every referencing request's
// window goes back to the pool once (its ref_cnt falls to 0). Counting
// each request's skipped tokens apart counted a shared prefix's sliding
// part once per request, room the pool does not have: on GPT-OSS-120B's
// built-in agentic run (docs/fidelity.md) 22.9 % more than the distinct
// blocks, up to 211,456 sliding tokens at once in a 168,657-token pool.
// So the freed tokens are kept per prefix block: a block is named by the
// chain of the request's block ids up to it (taken at its admission: the
// ids may not be read after its prefill) (ids at equal positions
// behind equal prefixes name the same KV, docs/traces.md), counted once
// while any running request has it behind its window; the tokens past a
// request's prompt blocks (its output, its prompt's partial tail) are its
// own.

// windowKey chains a block id onto the key of the blocks before it.
func windowKey(prev, id uint64) uint64 {
	h := (prev ^ id) * 0x9e3779b97f4a7c15
	h ^= h >> 31
	h *= 0xbf58476d1ce4e5b9
	return h ^ h>>29 ^ prev<<1
}

// windowKeysOf is r's chained block keys, taken once while it prefills
// (Request.Blocks may be read only until its prefill is done) and kept for
// its run and any run after a preemption; nil without a prefix cache,
// where nothing is shared, and for a request that never prefills here (a
// DecodeOnly one: its freed tokens all count as its own).
func (w *Worker) windowKeysOf(r *Request) []uint64 {
	if r.windowKeys() == nil && r.Stage == StagePrefill && w.tree != nil && len(r.Blocks) > 0 {
		keys := make([]uint64, len(r.Blocks))
		h := uint64(0)
		for i, id := range r.Blocks {
			h = windowKey(h, id)
			keys[i] = h
		}
		r.more().windowKeys = keys
	}
	return r.windowKeys()
}

// windowPool is the pool tokens tok sliding-layer tokens are.
func (w *Worker) windowPool(tok int64) int64 {
	return tok * int64(w.mdl.SlidingLayers) / int64(w.mdl.Layers)
}

// windowSplit is how many of r's prompt blocks, and how many tokens past
// them, skipped tokens cover.
func (w *Worker) windowSplit(r *Request, skipped int64) (blocks int, own int64) {
	b := int64(max(w.cfg.BlockSize, 1))
	n := skipped / b
	blocks = int(min(n, int64(len(w.windowKeysOf(r)))))
	return blocks, (n - int64(blocks)) * b
}

// windowNewTokens is the sliding tokens that counting r as having skipped
// tokens would add to the worker's count, without counting them.
func (w *Worker) windowNewTokens(r *Request, skipped int64) int64 {
	blocks, own := w.windowSplit(r, skipped)
	b := int64(max(w.cfg.BlockSize, 1))
	add := own - r.windowOwn()
	for _, k := range r.windowKeys()[r.windowBlocks():blocks] {
		if w.windowRefs[k] == 0 {
			add += b
		}
	}
	return add
}

// windowCount counts r as having skipped tokens behind its window. A
// running request's count only grows (windowSkippedNow never falls); one
// that would fall is counted again from the start.
func (w *Worker) windowCount(r *Request, skipped int64) {
	blocks, own := w.windowSplit(r, skipped)
	if blocks < r.windowBlocks() {
		w.windowUncount(r)
	}
	if w.windowRefs == nil {
		w.windowRefs = map[uint64]int32{}
	}
	if blocks == 0 && own == 0 && r.rare == nil {
		// Nothing behind its window yet: no count to keep.
		w.windowFreed = w.windowPool(w.windowTok)
		return
	}
	x := r.more()
	b := int64(max(w.cfg.BlockSize, 1))
	for ; x.windowBlocks < blocks; x.windowBlocks++ {
		k := x.windowKeys[x.windowBlocks]
		if w.windowRefs[k]++; w.windowRefs[k] == 1 {
			w.windowTok += b
		}
	}
	w.windowTok += own - x.windowOwn
	x.windowOwn = own
	w.windowFreed = w.windowPool(w.windowTok)
}

// windowUncount takes r's count back.
func (w *Worker) windowUncount(r *Request) {
	if x := r.rare; x != nil {
		b := int64(max(w.cfg.BlockSize, 1))
		for _, k := range x.windowKeys[:x.windowBlocks] {
			if w.windowRefs[k]--; w.windowRefs[k] <= 0 {
				delete(w.windowRefs, k)
				w.windowTok -= b
			}
		}
		w.windowTok -= x.windowOwn
		x.windowBlocks, x.windowOwn = 0, 0
	}
	w.windowFreed = w.windowPool(w.windowTok)
}
