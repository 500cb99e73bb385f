package kvc

import "github.com/pdhybrid/pdhybrid/internal/radix"

// blockIndex is what the router believes one worker caches: a radix tree of
// the prompts it sent there, bounded to the worker's pool in blocks with
// least-recently-dispatched eviction. The router cannot see inside a worker
// (over HTTP it never could), so it keeps this belief from what it sent, as
// the seed's kv-aware router and SGLang's cache-aware router do.
//
// A tree, not a set of blocks: consecutive turns share almost their whole
// chain, so a dispatch costs a walk over a few compressed edges plus the new
// blocks, not a map write per block of a 100K-token prompt.
type blockIndex struct {
	tree     *radix.Tree
	capacity int64
	// slidePool is the workers' sliding-window pool in blocks, 0 without
	// one (Options.SlidingPoolBlocks).
	slidePool int64
	// tails: the workers keep each turn's output below its prompt
	// (Options.SlidingTails), so a prompt's end is marked as holding one.
	tails bool
	// slideL of layers are sliding layers whose blocks behind the window
	// a vLLM worker frees (Options.SlidingLayers); 0 for none.
	slideL, layers int64
	clock          float64 // dispatch counter: the router's only notion of recency
	// ver changes with every change of the tree, to a value no index of the
	// router had before (vers counts them), so a memo of an overlap with
	// this index (overlaps) knows whether it still holds.
	ver  uint64
	vers *uint64
}

func newBlockIndex(o Options, vers *uint64) *blockIndex {
	x := &blockIndex{tree: radix.New(1), capacity: int64(o.IndexBlocks), vers: vers}
	switch {
	case o.SlidingRunBlocks <= 0:
	case o.SlidingPoolBlocks > 0:
		x.tree.SetSlidingPool(int64(o.SlidingRunBlocks))
		x.slidePool = int64(o.SlidingPoolBlocks)
	case o.SlidingLayers > 0 && o.Layers >= o.SlidingLayers:
		x.tree.SetSliding(int64(o.SlidingRunBlocks))
		x.slideL, x.layers = int64(o.SlidingLayers), int64(o.Layers)
	}
	if o.SlidingTails && x.tree.Sliding() {
		x.tails = true
		x.tree.SetTailsHoldWindow()
	}
	x.changed()
	return x
}

// changed gives the index a version no index of its router had before.
func (x *blockIndex) changed() {
	*x.vers++
	x.ver = *x.vers
}

// watchRoots keeps r.roots current for index i.
func (r *Router) watchRoots(i int) {
	if r.roots == nil {
		return
	}
	bit := uint64(1) << uint(i)
	r.index[i].tree.WatchRoot(func(first uint64, present bool) {
		if r.roots == nil {
			return
		}
		r.maskOK = false
		if present {
			r.roots[first] |= bit
		} else if m := r.roots[first] &^ bit; m != 0 {
			r.roots[first] = m
		} else {
			delete(r.roots, first)
		}
	})
}

// unwatchRoots clears index i's bit from r.roots (its index is replaced).
func (r *Router) unwatchRoots(i int) {
	r.maskOK = false
	bit := uint64(1) << uint(i)
	for first, m := range r.roots {
		if m&bit != 0 {
			if m &^= bit; m != 0 {
				r.roots[first] = m
			} else {
				delete(r.roots, first)
			}
		}
	}
}

// rootMask is roots[first], probed once for a run of asks about one prompt.
func (r *Router) rootMask(first uint64) uint64 {
	if !r.maskOK || r.maskFirst != first {
		r.maskFirst, r.mask, r.maskOK = first, r.roots[first], true
	}
	return r.mask
}

// prefix is the number of leading blocks believed present.
func (x *blockIndex) prefix(blocks []uint64) int {
	if len(blocks) == 0 {
		return 0
	}
	return x.tree.Match(blocks, 1).Blocks
}

// add records blocks as sent to the worker and returns a handle on their
// path, so the router can forget it when the worker reports an eviction.
// With shared, the tree keeps blocks instead of copying them (they are
// never written again).
func (x *blockIndex) add(blocks []uint64, shared bool) radix.Handle {
	if len(blocks) == 0 {
		return radix.Handle{}
	}
	x.clock++
	x.changed()
	m := x.tree.Match(blocks, 1)
	var tail radix.Handle
	if x.tails {
		tail = x.tree.TailInto(blocks, m)
	}
	m = x.tree.LockMatched(blocks, m, x.clock)
	insert := x.tree.Insert
	if shared {
		insert = x.tree.InsertShared
	}
	n, _ := insert(m.Node, blocks, m.Blocks, 1, x.clock)
	x.moveTail(tail, n)
	x.passWindow(n)
	x.tree.Unlock(n, x.clock)
	h := x.tree.HandleOf(n)
	x.settleFreed()
	for over := x.held() - x.capacity; over > 0; over = x.held() - x.capacity {
		if x.tree.Evict(over) == 0 {
			break
		}
	}
	x.settleSliding()
	return h
}

// settleSliding keeps the belief's sliding parts within the workers'
// sliding pool. A worker with one (SGLang's SWA radix cache) tombstones
// the sliding part of cached prompts, least recently used first, when its
// sliding pool is short, and then cuts a hit that ends without a window of
// sliding KV before it (swa_radix_cache.py); a belief without it would
// count such a hit whole. The router cannot see the worker's pool, but it
// knows the window, the pool's size and what it sent, in what order: it
// runs the worker's rule on its own record (radix's sliding pool: its
// order by last dispatch, a path's nodes nearer the root first, a leaf
// forgotten whole), so its overlap is cut where the worker's match
// would be, as far as its record goes. Running requests' windows are not
// known here: the belief takes back a little more than the worker.
func (x *blockIndex) settleSliding() {
	if x.slidePool == 0 {
		return
	}
	for x.tree.Tokens()-x.tree.GoneTokens() > x.slidePool && x.tree.DropReleased() > 0 {
	}
}

// A vLLM worker (Options.SlidingLayers) keeps one block pool for every
// layer and frees a sliding layer's blocks behind a request's window while
// it runs, to the free queue, where they keep their hash until an
// allocation reuses them, oldest freed first; a reused block's node is a
// tombstone, and a hit needs cdiv(window − 1, block) blocks before its end
// untombstoned (find_longest_cache_hit). The router's record runs the
// same rule: a prompt sent releases its sliding part behind the window
// (passWindow), which is room in the pool (held); the pool reuses the
// released parts, the oldest released first, while what it holds passes
// the room left without them (settleFreed, the engine's windowSettle), and
// only then forgets whole prompts, least recently sent first. Running
// requests' outputs and own blocks are not known here, so the record finds
// more room than the worker and tombstones later.

// passWindow releases, for a vLLM worker, the sliding part of the path to
// node n (the prompt just sent, locked) behind its window: the prompt's
// request passes it as its prefill runs (radix.Tree.Pass, which also takes
// back as held the released blocks inside the window, as vLLM's hit
// touches them).
func (x *blockIndex) passWindow(n int32) {
	if x.slideL == 0 {
		return
	}
	if d := x.tree.PathDepth(n) - int(x.tree.SlidingRun()); d > 0 {
		x.tree.Unpass(x.tree.Pass(n, 0, d, x.clock))
	} else {
		x.tree.Pass(n, 0, 0, x.clock)
	}
}

// freedOf is the pool blocks that tok sliding tokens are.
func (x *blockIndex) freedOf(tok int64) int64 { return tok * x.slideL / x.layers }

// held is the pool blocks the record is believed to hold: every layer's
// blocks of every node, less the sliding part of those released or
// tombstoned (vLLM).
func (x *blockIndex) held() int64 {
	if x.slideL == 0 {
		return x.tree.Tokens()
	}
	return x.tree.Tokens() - x.freedOf(x.tree.ReleasedTokens()+x.tree.GoneTokens())
}

// settleFreed tombstones released sliding parts, the oldest released
// first, while the room left without them is short of them.
func (x *blockIndex) settleFreed() {
	if x.slideL == 0 {
		return
	}
	for x.capacity-x.held() < x.freedOf(x.tree.ReleasedTokens()) && x.tree.DropReleased() > 0 {
	}
}

// moveTail marks the end of a prompt just sent, node n, as holding the
// turn's output below it, and clears the mark tail, of the previous
// prompt the new one continues (radix.Tree.TailInto): a worker that keeps
// outputs names the previous turn's output in its cache as the next turn
// arrives, so the previous prompt's end is an inner node there, like any
// other, and the new prompt's end holds the new tail. One mark a node is
// enough for what it is read for (radix.Tree.SetTailsHoldWindow: a
// tombstone there does not cut a match that runs on past it, and the node
// is tombstoned rather than forgotten whole).
func (x *blockIndex) moveTail(tail radix.Handle, n int32) {
	if !x.tails {
		return
	}
	h := x.tree.HandleOf(n)
	if tail != h {
		x.tree.TailBelow(tail, -1)
	}
	if x.tree.TailsBelow(n) == 0 {
		x.tree.TailBelow(h, 1)
	}
}

// forget drops the path h names, up to blocks other prompts share.
func (x *blockIndex) forget(h radix.Handle) {
	x.changed()
	x.tree.EvictHandle(h)
}
