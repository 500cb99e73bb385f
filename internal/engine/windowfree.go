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
// and the worker's Used drops by the second term's tokens, a prefix block
// shared by running requests counted once (windowFreed, windowshare.go).
//
// Prefix caching: vLLM keeps a freed block's hash until the block is
// reused, and a later prompt hits a sliding group's prefix when the last
// window − 1 tokens of it are still cached (find_longest_cache_hit searches
// from the right). The freed prompt blocks are kept on the prefix cache's
// nodes, released while cached and tombstoned once the pool reuses them
// (windowshare.go, radix's sliding state).

// windowFrees reports whether this worker frees sliding layers' blocks
// behind the window: vLLM, with sliding layers in the model.
func (w *Worker) windowFrees() bool {
	return w.mdl.SlidingLayers > 0 && w.tm.SlidingWindow > 0 && w.vllm()
}

// windowInit gives the prefix cache its sliding state on a worker that
// frees sliding blocks: a match needs the cdiv(window − 1, block) blocks
// before its end untombstoned (find_longest_cache_hit's
// sliding_window_contiguous_blocks).
func (w *Worker) windowInit() {
	if w.swaOn() && w.tm.SlidingWindow > 0 {
		// SGLang's sliding pool: a match needs a window of untombstoned
		// tokens before its end (swapool.go).
		w.tree.SetSlidingPool(int64(w.tm.SlidingWindow))
		return
	}
	if !w.windowFrees() {
		return
	}
	b := max(w.cfg.BlockSize, 1)
	w.tree.SetSliding(int64((w.tm.SlidingWindow - 1 + b - 1) / b * b))
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

// windowHoldCap is the most tokens a sliding layer of one request holds at
// once: the window less the token attending, a step's chunk, one block for
// a window that does not start on a block boundary, in whole blocks
// (vLLM's SlidingWindowSpec.max_memory_usage_bytes, cdiv(window − 1 +
// max_num_batched_tokens, block) + 1 blocks, which its startup check
// against max_model_len and get_max_concurrency_for_kv_cache_config use
// for a sliding group).
func (w *Worker) windowHoldCap() int64 {
	b := int64(max(w.cfg.BlockSize, 1))
	n := int64(w.tm.SlidingWindow - 1 + max(w.cfg.ChunkTokens, 1))
	return (n+b-1)/b*b + b
}

// windowSkippedNow is the tokens of r the sliding layers do not hold now.
// While it decodes, those behind its window (windowSkipped). While it
// prefills, vLLM allocates a sliding layer's slots chunk by chunk and
// frees what falls behind the window before each chunk (allocate_slots:
// remove_skipped_blocks, then get_num_blocks_to_allocate from the skipped
// blocks on), so its prompt's sliding part is never held whole: here r
// holds from its admission the most it will hold at once, min(prompt −
// skipped, windowHoldCap), never more as its prefill advances, so that
// the chunks to come never find the pool over-committed.
func (w *Worker) windowSkippedNow(r *Request) int64 {
	c := windowComputed(r)
	s := w.windowSkipped(c)
	if r.Stage != StagePrefill {
		return s
	}
	b := int64(max(w.cfg.BlockSize, 1))
	return max(s, (int64(r.Input+r.recompute)-w.windowHoldCap())/b*b)
}

// windowFreedOf is the pool tokens r's sliding layers have freed.
func (w *Worker) windowFreedOf(r *Request) int64 {
	return w.windowSkippedNow(r) * int64(w.mdl.SlidingLayers) / int64(w.mdl.Layers)
}

// windowAdmitCredit is what r, about to be admitted with its cached prefix
// matched, needs less of the pool than its whole prompt: the sliding
// layers' part it will never hold and no running request has counted
// freed yet (0 unless this worker frees sliding blocks).
func (w *Worker) windowAdmitCredit(r *Request) int64 {
	if !w.windowFrees() {
		return 0
	}
	st := r.Stage
	r.Stage = StagePrefill
	tok := w.windowNewTokens(r, w.windowSkippedNow(r))
	r.Stage = st
	return w.windowPool(w.windowTok+tok) - w.windowPool(w.windowTok)
}

// windowPeak bounds the pool tokens a request of input prompt tokens and
// out output tokens holds at once on this worker: all of them at every
// layer's charge, less, for a worker that frees sliding blocks, the
// sliding layers' tokens beyond windowHoldCap and two blocks more (the
// freed tokens are whole blocks, and their pool share is rounded down), so
// that a request this admits is never too large for its own admission. A
// request of an all-sliding model (Mistral-7B with its window on every
// layer) fits in vLLM when its window does, as here, within two blocks.
func (w *Worker) windowPeak(input, out int64) int64 {
	need := input + out
	if !w.windowFrees() {
		return need
	}
	b := int64(max(w.cfg.BlockSize, 1))
	return need - w.windowPool(max(need-w.windowHoldCap()-2*b, 0))
}

// windowAdvance frees, after a step ending at now, the sliding-layer
// blocks the running requests' windows have left behind (vLLM does it
// before it allocates the next step's slots).
func (w *Worker) windowAdvance(now float64) {
	if !w.windowFrees() {
		return
	}
	for _, r := range w.decoding {
		w.windowSet(now, r)
	}
	if r := w.chunked; r != nil {
		w.windowSet(now, r)
	}
	w.windowSettle()
}

// windowSet brings r's freed tokens, and the worker's sum, up to date.
func (w *Worker) windowSet(now float64, r *Request) {
	if r.Stage != StagePrefill && r.Stage != StageDecoding {
		return
	}
	w.windowCount(now, r, w.windowSkippedNow(r))
	r.setWindowFreed(w.windowFreedOf(r))
	w.windowSettle()
}

// windowRelease takes back r's count when it stops running (ends, is
// preempted or aborted), before its lock on the prefix cache goes: the
// nodes it passed stay released (windowshare.go), its own tokens go with
// the rest of its KV, and what of them its output tail keeps (output.go)
// is charged again, taken from the cache if the pool is short.
func (w *Worker) windowRelease(now float64, r *Request) {
	if r.windowPassed() == 0 && r.windowOwn() == 0 {
		return
	}
	w.windowUncount(r)
	r.setWindowFreed(0)
	if w.free() < 0 {
		w.makeRoomFor(now, 0, "")
	}
}

// FreedWindow is, for a worker that frees sliding layers' blocks behind
// the window (vLLM), the window in tokens and the model's sliding layers
// of its layers, for a router's view of its cache (kvc.Options); zeros
// otherwise.
func (w *Worker) FreedWindow() (window, slidingLayers, layers int) {
	if !w.windowFrees() {
		return 0, 0, 0
	}
	return w.tm.SlidingWindow, w.mdl.SlidingLayers, w.mdl.Layers
}
