package engine

import "github.com/pdhybrid/pdhybrid/internal/radix"

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
// only when that fits beside what the others hold (swaFits). The hold
// never grows. It is one window more than
// SGLang's first-chunk gate for a long prompt (SGLang counts the window of
// a prompt's earlier chunks as it locks them, and may shrink a continuing
// chunk where this waits).
//
// With a prefix cache the cached tokens hold sliding slots too, as in the
// SWA radix cache: a node's sliding part is evictable unless a lock needs
// it (a running request locks only the last window of its path: SGLang's
// inc_lock_ref takes the sliding lock for the bottom sliding_window
// tokens; here the request passes the rest, radix.Tree.Pass), and when the
// pool is short the least recently used evictable parts are tombstoned
// (the SWA LRU's swa-only eviction; the full part stays cached). A match
// then ends where the window before it is free of tombstones
// (_match_prefix_helper, radix's match limit with run = the window).

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

// swaFits reports whether r, about to be admitted (its cached prefix
// locked), fits in the sliding pool beside the running requests' holds;
// if it does, it tombstones what the cache must give up for it. The
// cache's nodes that a lock holds are not counted against it: a running
// request's locked window is in its hold already, and a session's pin
// (session.go) holds its whole path here where SGLang's lock would hold
// only its last window, which is all its next turn's match needs; the
// pool may then be over-committed by pinned tokens, which only makes the
// tombstones fall on other nodes sooner.
func (w *Worker) swaFits(r *Request) bool {
	if !w.swaOn() {
		return true
	}
	hold := w.swaHoldOf(r)
	if w.swaUsed+hold > w.swaCap {
		return false
	}
	w.swaSettle(hold)
	return true
}

// swaTree reports whether the cache's tokens hold sliding slots.
func (w *Worker) swaTree() bool { return w.swaOn() && w.tree != nil && w.tree.Sliding() }

// swaCached is the sliding slots the prefix cache holds: its untombstoned
// tokens.
func (w *Worker) swaCached() int64 {
	if !w.swaTree() {
		return 0
	}
	return w.tree.Tokens() - w.tree.GoneTokens() + w.swaTailTok
}

// swaSettle takes back the cache's least recently used evictable sliding
// parts while the holds, the cache and extra more tokens pass the pool:
// an inner node is tombstoned, an unreferenced leaf evicted whole, its
// full part too (radix.Tree.DropReleased, SGLang's order), and so is an
// output tail, a leaf in SGLang's tree, in the same order by its finish.
func (w *Worker) swaSettle(extra int64) {
	if !w.swaTree() {
		return
	}
	before := w.tree.Tokens()
	for w.swaUsed+w.swaCached()+extra > w.swaCap {
		rt, hasNode := w.tree.OldestReleased()
		tt, hasTail := w.oldestTail()
		if hasTail && w.swaTailTok > 0 && (!hasNode || tt < rt) {
			w.stats.EvictedTokens += w.evictOldestTail()
			continue
		}
		if w.tree.DropReleased() == 0 {
			break
		}
	}
	w.stats.EvictedTokens += before - w.tree.Tokens()
}

// An output tail's sliding slots. SGLang inserts a finished request's
// prompt and output into its SWA radix cache (cache_finished_req) with
// swa_evicted_seqlen, how far its decode had freed the sliding slots
// behind its window: that part goes in as a tombstone, the rest, about
// the last window, as a leaf that holds its sliding slots. The decode
// frees them every window steps (ScheduleBatch.maybe_evict_swa: when
// decode_batch_idx % window == 1, _evict_swa(req, seqlen − 1)) up to
// seqlen − 1 − window, page-aligned down, never below what the tree
// holds of the request (cache_protected_len: its prompt, inserted after
// its prefill). Here the tail keeps its output outside the tree until the
// next turn names it (output.go): it holds the slots of its tokens from
// there (swaLive, in the sliding pool's count: swaCached), and naming it
// tombstones the named blocks before it (swaNameTail).

// swaEvictedTo is swa_evicted_seqlen for r as it finishes: the tokens
// from its sequence's start whose sliding slots are no longer held by it
// or the tree.
func (w *Worker) swaEvictedTo(r *Request) int64 {
	b := int64(max(w.cfg.BlockSize, 1))
	win := int64(w.tm.SlidingWindow)
	protected := int64(r.Input) / b * b
	steps := int64(r.generated) - 1 // decode steps: the first token came from the prefill
	if steps < 2 {
		return protected
	}
	last := (steps-2)/win*win + 1 // the last step with decode_batch_idx % window == 1
	return max(protected, (int64(r.Input)+last-win)/b*b)
}

// swaKeepTail gives tail t, kept as r finishes, its sliding slots and
// hangs it below r's prompt in the tree.
func (w *Worker) swaKeepTail(r *Request, t *outputTail) {
	if !w.swaTree() || !r.locked {
		return
	}
	t.swaFrom = w.swaEvictedTo(r)
	end := int64(t.input) + t.tokens
	t.swaLive = min(max(end-max(t.swaFrom, int64(t.input)), 0), t.tokens)
	w.swaTailTok += t.swaLive
	t.node = w.tree.HandleOf(r.node)
	w.tree.TailBelow(t.node, 1)
}

// swaDropTail takes tail t's slots out of the count as it goes.
func (w *Worker) swaDropTail(t *outputTail) {
	w.swaTailTok -= t.swaLive
	t.swaLive = 0
	w.tree.TailBelow(t.node, -1)
	t.node = radix.Handle{}
}

// swaNameTail tombstones, once tail t is named in the cache below node n,
// the named blocks from block from on whose sliding slots its turn's
// decode had freed.
func (w *Worker) swaNameTail(n int32, from int, t *outputTail) {
	if !w.swaTree() {
		return
	}
	b := int64(max(w.cfg.BlockSize, 1))
	w.tree.Bury(n, from, int(t.swaFrom/b))
	w.swaSettle(0)
}

// swaTake records r's hold as it is admitted or as its prefill advances
// (at now), and passes the nodes of its locked path behind its window's
// blocks, which it no longer locks in the sliding pool.
func (w *Worker) swaTake(now float64, r *Request) {
	if !w.swaOn() {
		return
	}
	h := w.swaHoldOf(r)
	w.swaUsed += h - r.swaHold
	r.swaHold = h
	if w.swaTree() && r.locked {
		b := max(w.cfg.BlockSize, 1)
		keep := (w.tm.SlidingWindow + b - 1) / b
		if blocks := w.tree.PathDepth(r.node) - keep; blocks > 0 {
			r.more().windowPassed = w.tree.Pass(r.node, r.windowPassed(), blocks, now)
		}
	}
	w.swaSettle(0)
}

// swaRelease gives r's hold back when it leaves the pool, and its passes
// (before its lock on the cache goes).
func (w *Worker) swaRelease(r *Request) {
	w.swaUsed -= r.swaHold
	r.swaHold = 0
	if w.swaTree() && r.windowPassed() != 0 {
		w.tree.Unpass(r.windowPassed())
		r.rare.windowPassed = 0
	}
}

// SWAUsed and SWACapacity are the sliding pool's held and total tokens
// (0, 0 without one).
func (w *Worker) SWAUsed() int64     { return w.swaUsed }
func (w *Worker) SWACapacity() int64 { return w.swaCap }

// SWAWindow is the sliding window of a worker with SGLang's sliding pool
// (a router's view of its cache needs it, kvc.Options), 0 without one.
func (w *Worker) SWAWindow() int {
	if !w.swaOn() {
		return 0
	}
	return w.tm.SlidingWindow
}

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
