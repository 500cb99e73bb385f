package engine

// vLLM frees a sliding-window layer's blocks behind the window while the
// request runs (SlidingWindowManager in vllm/v1/core/
// single_type_kv_cache_manager.py): before it allocates a step's slots it
// counts the tokens no later query attends to, get_num_skipped_tokens =
// computed − window + 1, and returns every whole block of them to the block
// pool (remove_skipped_blocks; the block table keeps a null block in their
// place). The full-attention layers keep every block to the request's end.
// A model with both kinds shares one block pool between the layer groups
// (the hybrid KV cache manager), so what the sliding group frees is room
// for any request's blocks. Here the pool counts tokens of every layer's
// KV, so a request past its window holds, in pool tokens,
//
//	context − skipped · sliding layers / layers
//
// and the worker's Used drops by the sum of the second term (windowFreed).
//
// Prefix caching: vLLM keeps a freed block's hash until the block is
// reused, and a later prompt hits a sliding group's prefix when the last
// window − 1 tokens of it are still cached (find_longest_cache_hit searches
// from the right); a request ending near its window keeps those. The radix
// tree here holds a cached prompt at every layer's charge, so when a
// request that freed blocks ends, what others took of them is taken back
// from the cache by evicting least recently used prefixes: the cache holds
// less than vLLM's, which reuses the sliding blocks first and keeps the
// full layers' blocks of the same prompt.

// windowFrees reports whether this worker frees sliding layers' blocks
// behind the window: vLLM, with sliding layers in the model.
func (w *Worker) windowFrees() bool {
	return w.mdl.SlidingLayers > 0 && w.tm.SlidingWindow > 0 && w.vllm()
}

// windowSkipped is the tokens of a request with computed tokens whose
// sliding-layer blocks vLLM has freed: computed − window + 1, in whole
// blocks of the worker's block size.
func (w *Worker) windowSkipped(computed int) int64 {
	s := computed - w.tm.SlidingWindow + 1
	if s <= 0 {
		return 0
	}
	b := max(w.cfg.BlockSize, 1)
	return int64(s / b * b)
}

// windowComputed is the tokens whose KV r has computed: its cached and
// prefilled prompt while it prefills; while it decodes, its context but the
// newest token, which the next step computes.
func windowComputed(r *Request) int {
	if r.Stage == StagePrefill {
		return r.CachedTokens + r.prefilled
	}
	return r.Input + r.generated - 1
}

// windowFreedOf is the pool tokens r's sliding layers have freed.
func (w *Worker) windowFreedOf(r *Request) int64 {
	return w.windowSkipped(windowComputed(r)) * int64(w.mdl.SlidingLayers) / int64(w.mdl.Layers)
}

// windowAdvance frees, after a step, the sliding-layer blocks the running
// requests' windows have left behind (vLLM does it before it allocates the
// next step's slots).
func (w *Worker) windowAdvance() {
	if !w.windowFrees() {
		return
	}
	for _, r := range w.decoding {
		w.windowSet(r)
	}
	if r := w.chunked; r != nil {
		w.windowSet(r)
	}
}

// windowSet brings r's freed tokens, and the worker's sum, up to date.
func (w *Worker) windowSet(r *Request) {
	if r.Stage != StagePrefill && r.Stage != StageDecoding {
		return
	}
	f := w.windowFreedOf(r)
	w.windowFreed += f - r.windowFreed
	r.windowFreed = f
}

// windowRelease gives back r's freed tokens when it stops running (ends,
// is preempted or aborted): its blocks are all freed now, and what others
// took of the sliding ones comes out of the prefix cache.
func (w *Worker) windowRelease(now float64, r *Request) {
	if r.windowFreed == 0 {
		return
	}
	w.windowFreed -= r.windowFreed
	r.windowFreed = 0
	if w.free() < 0 {
		w.makeRoomFor(now, 0, "")
	}
}
