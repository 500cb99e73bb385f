package engine

// SGLang's second KV pool for sliding-window layers (model.SWAPoolRatio):
// for the architectures it serves from two pools (GPT-OSS, Llama-4, ...)
// SGLang keeps the full-attention layers' KV in the pool the scheduler
// counts (the worker's capacity here) and the sliding layers' in a pool of
// --swa-full-tokens-ratio as many tokens (SWATokenToKVPoolAllocator in
// python/sglang/srt/mem_cache/swa_memory_pool.py: an allocation takes a
// slot in both, and what is free is the smaller of the two). A running
// request needs sliding slots only for its window: its decode frees the
// ones behind it (the scheduler's SWA eviction), and its prompt's, once
// inserted, are the SWA radix cache's (swa_radix_cache.py), which evicts
// the sliding part of cached tokens on its own (a tombstone keeps the
// full layers' part), so cached prompts never keep a request out. The
// prefill adder (schedule_policy.py, PrefillAdder) admits a request only
// when the sliding pool's free and evictable slots cover its next chunk,
// floored at the window for its decode.
//
// Here a request holds, from its admission to its end, its window —
// min(prompt + output, window) — plus the prompt chunk it computes next
// while it prefills (min(what is left, the chunk budget)); it is admitted
// only when that fits beside what the others hold. The hold never grows,
// so the sliding pool is never over-committed. It is one window more than
// SGLang's first-chunk gate for a long prompt (SGLang counts the window of
// a prompt's earlier chunks as it locks them, and may shrink a continuing
// chunk where this waits), and a tombstoned prefix is still matched here
// (SGLang's match ends at the longest node boundary with a window of
// untombstoned tokens before it; cached prompts hold no sliding slots
// here, so nothing here is tombstoned: docs/fidelity.md).

// swaOn reports whether the worker keeps SGLang's sliding pool.
func (w *Worker) swaOn() bool { return w.swaCap > 0 }

// swaCapacity is the sliding pool's tokens for a worker of capacity pool
// tokens: the profile's ratio of it, for SGLang workers with sliding
// layers; 0 otherwise.
func swaCapacity(w *Worker) int64 {
	r := w.mdl.SWAPoolRatio
	if r <= 0 || w.tm.SlidingWindow <= 0 || w.vllm() {
		return 0
	}
	return int64(r * float64(w.capacity))
}

// swaHoldOf is what r holds of the sliding pool now: its window and, while
// it prefills, its next chunk (a DecodeOnly request's prompt arrives
// computed: its window alone).
func (w *Worker) swaHoldOf(r *Request) int64 {
	hold := int64(min(r.Input+max(r.Output, 1), w.tm.SlidingWindow))
	if r.Kind != DecodeOnly && (r.Stage == StagePrefill || r.Stage == StageWaiting || r.Stage == StageNew) {
		hold += int64(min(max(r.Uncached()-r.prefilled, 0), w.cfg.ChunkTokens))
	}
	// A request the pool cannot hold alone runs with what it can (SGLang
	// shrinks its chunk to the pool, PrefillAdder._swa_chunk_cap; the
	// smaller chunks' time is not charged here).
	return min(hold, w.swaCap)
}

// swaFits reports whether r, about to be admitted, fits in the sliding
// pool beside the running requests.
func (w *Worker) swaFits(r *Request) bool {
	return !w.swaOn() || w.swaUsed+w.swaHoldOf(r) <= w.swaCap
}

// swaTake records r's hold as it is admitted or as its prefill advances.
func (w *Worker) swaTake(r *Request) {
	if !w.swaOn() {
		return
	}
	h := w.swaHoldOf(r)
	w.swaUsed += h - r.swaHold
	r.swaHold = h
}

// swaRelease gives r's hold back when it leaves the pool.
func (w *Worker) swaRelease(r *Request) {
	w.swaUsed -= r.swaHold
	r.swaHold = 0
}

// SWAUsed and SWACapacity are the sliding pool's held and total tokens
// (0, 0 without one).
func (w *Worker) SWAUsed() int64     { return w.swaUsed }
func (w *Worker) SWACapacity() int64 { return w.swaCap }

// unadmit undoes what admit took before it found no room for r: the
// cached prefix's lock and the host tier's, and the prefix counts.
func (w *Worker) unadmit(now float64, r *Request) {
	if r.locked {
		w.tree.Unlock(r.node, now)
		r.locked = false
	}
	w.hiUnlock(now, r)
	r.CachedTokens, r.matched, r.loaded = 0, 0, 0
}
