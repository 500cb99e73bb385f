package engine

// Running requests that share a cached prefix share its blocks: in vLLM a
// prefix block is one block of the pool however many requests reference
// it, and a sliding layer's block behind every referencing request's
// window goes back to the pool once (its ref_cnt falls to 0). So the
// freed tokens of a request's prompt are kept on the prefix cache's nodes
// (radix.Tree.Pass: a node every holder has passed is released), and only
// the tokens past its path in the tree (its prompt while it is not
// inserted yet, its output) are its own (windowTok).
//
// A released node stays released when its requests end: vLLM freed those
// blocks while the requests ran, to the tail of its free queue, where they
// keep their hash until an allocation reuses them. So they are free room
// here, and the pool takes them back, the longest released first, when
// what it has handed out passes what is free without them (windowSettle);
// the node is then a tombstone, and a later match needs the window before
// its end free of tombstones (radix's match limit: vLLM's
// SlidingWindowManager.find_longest_cache_hit, the coordinator taking the
// shortest group's hit). Before, every freed token was given back to the
// request's prompt when it ended, so a cached prompt counted at every
// layer's charge, and a match was never cut.

// windowPool is the pool tokens tok sliding-layer tokens are.
func (w *Worker) windowPool(tok int64) int64 {
	return tok * int64(w.mdl.SlidingLayers) / int64(w.mdl.Layers)
}

// windowTreeFreed is the pool tokens the prefix cache's released and
// tombstoned nodes do not hold.
func (w *Worker) windowTreeFreed() int64 {
	if w.tree == nil || !w.windowFrees() {
		return 0
	}
	return w.windowPool(w.tree.ReleasedTokens() + w.tree.GoneTokens())
}

// windowFreedNow is the pool tokens sliding layers do not hold: running
// requests' own tokens behind their windows and the cache's released and
// tombstoned nodes.
func (w *Worker) windowFreedNow() int64 { return w.windowFreed + w.windowTreeFreed() }

// windowEvictableLess is what the cache's evictable tokens overstate: an
// unreferenced node whose sliding part is released or gone frees only
// its full layers' part when it is evicted, and so does an output tail
// (a pinned tail's share is taken off too: evictable is then a little
// low, never high).
func (w *Worker) windowEvictableLess() int64 {
	if w.tree == nil || !w.windowFrees() {
		return 0
	}
	return w.windowPool(w.tree.EvictableSlideTokens()) + w.windowPool(w.windowTailTok)
}

// windowKeepTail moves r's freed output tokens to the session's tail t as
// r ends (output.go): vLLM freed the sliding part of the output its
// window passed while the turn ran, so the tail does not hold it.
func (w *Worker) windowKeepTail(r *Request, t *outputTail) {
	if !w.windowFrees() || r.rare == nil {
		return
	}
	t.slideSkip = w.windowSkippedNow(r)
	own := min(r.rare.windowOwn, t.tokens)
	t.slideOwn = own
	r.rare.windowOwn -= own // its count goes with the tail, not with r
	w.windowTailTok += own
}

// windowDropTail takes a tail's freed tokens out of the count when the
// tail goes (evicted, replaced, or named in the cache).
func (w *Worker) windowDropTail(t *outputTail) {
	if t.slideOwn == 0 {
		return
	}
	w.windowTok -= t.slideOwn
	w.windowTailTok -= t.slideOwn
	t.slideOwn = 0
	w.windowFreed = w.windowPool(w.windowTok)
}

// windowNameTail releases, once a tail is named in the cache below node n
// (its prompt and output), the blocks the turn's window had left behind:
// a pass by the naming, which holds them only for the moment.
func (w *Worker) windowNameTail(now float64, n int32, t *outputTail) {
	if !w.windowFrees() || t.slideSkip == 0 {
		return
	}
	b := int64(max(w.cfg.BlockSize, 1))
	if blocks := int(t.slideSkip / b); blocks > 0 {
		w.tree.Unpass(w.tree.Pass(n, 0, blocks, now))
	}
	w.windowSettle()
}

// windowTreeBlocks is how many of r's skipped tokens' blocks lie on its
// locked path in the prefix cache.
func (w *Worker) windowTreeBlocks(r *Request, skipped int64) int {
	if w.tree == nil || !w.windowFrees() || !r.locked {
		return 0
	}
	b := int64(max(w.cfg.BlockSize, 1))
	return int(min(skipped/b, int64(w.tree.PathDepth(r.node))))
}

// windowNewTokens is the sliding tokens that counting r, just locked on
// its cached prefix, as having skipped tokens would free, without
// counting them: its own tokens past its path, and the path's nodes every
// other holder has passed, less the released nodes inside its window
// that it takes back.
func (w *Worker) windowNewTokens(r *Request, skipped int64) int64 {
	blocks := w.windowTreeBlocks(r, skipped)
	own := skipped - int64(blocks)*int64(max(w.cfg.BlockSize, 1))
	add := own - r.windowOwn()
	if r.locked && w.windowFrees() && r.windowPassed() == 0 {
		release, hold := w.tree.PassGain(r.node, blocks)
		add += release - hold
	}
	return add
}

// windowCount counts r as having skipped tokens behind its window: the
// tree's nodes on its path up to them passed, the rest its own. A running
// request's count only grows (windowSkippedNow never falls), and so do its
// passes; its own part may fall, when its prompt enters the tree.
func (w *Worker) windowCount(now float64, r *Request, skipped int64) {
	blocks := w.windowTreeBlocks(r, skipped)
	own := skipped - int64(blocks)*int64(max(w.cfg.BlockSize, 1))
	if blocks > 0 {
		r.more().windowPassed = w.tree.Pass(r.node, r.windowPassed(), blocks, now)
	} else if r.locked && w.tree != nil && r.windowPassed() == 0 {
		w.tree.Pass(r.node, 0, 0, now) // its window takes back what it hit
	}
	if own != r.windowOwn() {
		w.windowTok += own - r.windowOwn()
		r.more().windowOwn = own
	}
	w.windowFreed = w.windowPool(w.windowTok)
}

// windowUncount takes r's count back: its passes (before its lock goes)
// and its own tokens.
func (w *Worker) windowUncount(r *Request) {
	if x := r.rare; x != nil {
		if x.windowPassed != 0 {
			w.tree.Unpass(x.windowPassed)
			x.windowPassed = 0
		}
		w.windowTok -= x.windowOwn
		x.windowOwn = 0
	}
	w.windowFreed = w.windowPool(w.windowTok)
}

// windowSettle takes back released nodes, the longest released first, while
// the pool has handed out more than it has free without them: vLLM's
// allocations reuse free blocks in the order they were freed, and a
// released block reused loses its hash (the node is then a tombstone).
func (w *Worker) windowSettle() {
	if w.tree == nil || !w.windowFrees() {
		return
	}
	for w.free() < w.windowPool(w.tree.ReleasedTokens()) && w.tree.DropReleased() > 0 {
	}
}
