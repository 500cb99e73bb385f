package radix

import "slices"

// Sliding-window layers' part of each node. A model with sliding-window
// layers keeps, for every cached token, the full-attention layers' KV and
// the sliding layers' KV, and the engines let the two go at different
// times: a request no longer needs the sliding KV of tokens behind its
// window, and the engines give those back first.
//
//   - A holder (a running request) passes a node when its window has left
//     the node behind (Pass). A node every holder has passed has its
//     sliding part released: vLLM frees those blocks to its free queue
//     while the request runs (SlidingWindowManager.remove_skipped_blocks),
//     where they keep their hash until the pool reuses them.
//   - A node whose sliding part the pool took back is a tombstone (gone):
//     the full layers' KV is still cached, the sliding layers' is not
//     (vLLM: the block was reused; SGLang: the SWA radix cache evicted the
//     node's sliding part, swa_radix_cache.py).
//
// A match needs the sliding KV of the window before its end, so with
// tombstones on the path a match ends at the end of the rightmost run of
// untombstoned nodes holding at least the window's tokens (or of the run
// from the root, whatever its length): vLLM's
// SlidingWindowManager.find_longest_cache_hit, searching from the right for
// cdiv(window − 1, block) cached blocks in a row, and SGLang's
// _match_prefix_helper, counting the tokens since the last tombstone, are
// the same rule with their own run length (SetSliding).

// SetSliding turns the per-node sliding state on: a match with a tombstone
// on its path needs run tokens of untombstoned nodes before its end. A
// tree without it (the default) keeps no sliding state and matches as
// before.
func (r *Tree) SetSliding(run int64) {
	r.srun = max(run, 1)
}

// SetSlidingPool is SetSliding for a cache whose sliding layers have a
// pool of their own (SGLang's SWA radix cache, swa_radix_cache.py): a
// released node's sliding part still holds its slots there, evictable
// (ReleasedTokens counts it), a node no holder references is released
// too, and a holder's lock takes a released node back as held (SGLang
// locks a path's sliding part as it locks the path, its LRU standing
// refreshed) until the holder passes it.
func (r *Tree) SetSlidingPool(run int64) {
	r.srun = max(run, 1)
	r.spool = true
}

// SlidingRun is the untombstoned tokens a match needs before its end (0
// without sliding state).
func (r *Tree) SlidingRun() int64 { return r.srun }

// Sliding reports whether the tree keeps sliding state.
func (r *Tree) Sliding() bool { return r.srun > 0 }

// ReleasedTokens is the tokens of nodes whose sliding part is released
// (no holder needs it) and still cached.
func (r *Tree) ReleasedTokens() int64 { return r.sfreeTok }

// GoneTokens is the tokens of tombstoned nodes: their sliding part is not
// held at all.
func (r *Tree) GoneTokens() int64 { return r.sgoneTok }

// PathDepth is the blocks from the root to the end of node n.
func (r *Tree) PathDepth(n int32) int {
	d := 0
	for ; n > root; n = r.nodes[n].parent {
		d += len(r.nodes[n].key)
	}
	return d
}

// Pass records that the holder of a lock on node lock, which had passed
// the path up to node passed (root at first), has now left the path's
// first blocks blocks behind its window (clamped to the path). A node
// every holder has passed is released (ReleasedTokens). The first Pass of
// a holder after its Lock also takes back, as held, released nodes still
// inside its window (vLLM touches the cached blocks of a hit it attends
// to). It splits the node the boundary falls inside, so that the passed
// path ends on a node, and returns the passed path's last node: the
// holder's passed for the next Pass and for Unpass.
func (r *Tree) Pass(lock, passed int32, blocks int, now float64) int32 {
	if r.srun == 0 || lock <= root {
		return passed
	}
	depth := r.PathDepth(lock)
	blocks = min(blocks, depth)
	if passed == root && blocks <= 0 {
		// Nothing passed yet: its whole path is inside its window.
		for y := lock; y > root; y = r.nodes[y].parent {
			r.unrelease(y)
		}
		return root
	}
	if blocks <= r.PathDepth(passed) {
		return passed // a holder's passes only grow
	}
	// Find the node the boundary ends in, walking up from lock.
	x, end := lock, depth
	for x > root && end-len(r.nodes[x].key) >= blocks {
		end -= len(r.nodes[x].key)
		x = r.nodes[x].parent
	}
	// x holds blocks in (end − len, end]; the boundary at blocks.
	if x > root && end > blocks {
		x = r.split(x, blocks-(end-len(r.nodes[x].key)))
	}
	if passed == root {
		// Nodes inside the window are held by this holder.
		for y := lock; y > root && y != x; y = r.nodes[y].parent {
			r.unrelease(y)
		}
	}
	for y := x; y > root && y != passed; y = r.nodes[y].parent {
		nd := &r.nodes[y]
		nd.srel++
		r.maybeRelease(y, now)
	}
	return x
}

// Unpass takes back a holder's passes (before its Unlock).
func (r *Tree) Unpass(passed int32) {
	for y := passed; y > root; y = r.nodes[y].parent {
		nd := &r.nodes[y]
		nd.srel--
		if nd.srel < 0 {
			panic("radix: node unpassed more often than passed")
		}
	}
}

// maybeRelease releases node n's sliding part when every holder of it
// has passed it.
func (r *Tree) maybeRelease(n int32, now float64) {
	nd := &r.nodes[n]
	if nd.ref != nd.srel || nd.sfree || nd.sgone || (nd.ref == 0 && !r.spool) {
		return
	}
	nd.sfree = true
	nd.sat = now
	nd.sver++
	r.sfreeTok += nd.tokens
	if nd.ref == 0 {
		r.sevictTok += nd.tokens
	}
	r.pushSlide(n)
}

// pushSlide files released node n in the order the pool takes released
// parts back. vLLM's: when it was released (its free queue hands out
// blocks oldest freed first). SGLang's (SetSlidingPool): its SWA LRU list
// (swa_radix_cache.py, LRUList), by last use — a match or an insert moves
// the path to the front, the nodes nearer the root behind the deeper ones
// (reset_node_and_parents_mru, _insert_helper: "swa will tombstone the
// node closer to root first") — which is the node's access time here,
// ties broken by depth: at one instant a path's nodes nearer the root go
// first. Its depth in blocks fills the sequence's high bits.
func (r *Tree) pushSlide(n int32) {
	nd := &r.nodes[n]
	e := lruEntry{access: nd.sat, seq: r.nextSeq(), node: n, ver: nd.sver}
	if r.spool {
		e.access = nd.access
		e.seq |= uint64(r.PathDepth(n)) << 40
	}
	r.slru.push(e)
	if len(r.slru) > 1024 && len(r.slru) > 4*(len(r.nodes)-len(r.free)) {
		r.compactSlide()
	}
}

// slideTouched re-files a released node whose last use moved (an Unlock
// that left it unreferenced), in SGLang's order only: a request's end
// inserts its path again, which moves it to the front of the SWA LRU.
func (r *Tree) slideTouched(n int32) {
	if nd := &r.nodes[n]; r.spool && nd.sfree {
		nd.sver++
		r.pushSlide(n)
	}
}

func (r *Tree) nextSeq() uint64 { r.seq++; return r.seq }

// unrelease takes node n's released sliding part back as held.
func (r *Tree) unrelease(n int32) {
	nd := &r.nodes[n]
	if !nd.sfree {
		return
	}
	nd.sfree = false
	nd.sver++
	r.sfreeTok -= nd.tokens
	if nd.ref == 0 {
		r.sevictTok -= nd.tokens
	}
}

// revive marks node n's sliding part held again: a request computed it
// anew (Insert over a tombstone, or over a released node).
func (r *Tree) revive(n int32) {
	nd := &r.nodes[n]
	r.unrelease(n)
	if !nd.sgone {
		return
	}
	nd.sgone = false
	r.sgoneTok -= nd.tokens
	if nd.ref == 0 {
		r.sevictTok -= nd.tokens
	}
	r.ver++
	r.touchSubtree(n)
}

// OldestReleased is the release time of the released node DropReleased
// takes first; ok is false when none is released.
func (r *Tree) OldestReleased() (t float64, ok bool) {
	for len(r.slru) > 0 {
		e := r.slru[0]
		if r.slideLive(e) {
			return e.access, true
		}
		r.slru.pop()
	}
	return 0, false
}

// DropReleased takes back the sliding part of the released node first in
// the pool's order (pushSlide) and returns its tokens; 0 when none is
// released. Under vLLM the node is tombstoned (its blocks reused, oldest
// freed first). Under SGLang (SetSlidingPool) it is tombstoned if it has
// children or a holder; an unreferenced leaf goes whole, its full layers'
// KV too, and so do the tombstoned ancestors that leaves (SGLang's
// evict() with a sliding need: a leaf in the SWA LRU is freed with its
// full part and _iteratively_delete_tombstone_leaf follows it up, so no
// leaf is a tombstone).
func (r *Tree) DropReleased() int64 {
	if _, ok := r.OldestReleased(); !ok {
		return 0
	}
	n := r.slru.pop().node
	nd := &r.nodes[n]
	if r.spool && nd.ref == 0 && nd.kid == 0 && nd.stail == 0 {
		return r.dropLeaf(n)
	}
	nd.sfree, nd.sgone = false, true
	nd.sver++
	r.sfreeTok -= nd.tokens
	r.sgoneTok += nd.tokens
	r.ver++
	r.touchSubtree(n)
	return nd.tokens
}

// dropLeaf frees the unreferenced released leaf n whole and then its
// ancestors that are unreferenced tombstones left without children; it
// returns n's tokens, the sliding part freed.
func (r *Tree) dropLeaf(n int32) int64 {
	tok, p := r.freeNode(n)
	r.dropTombstones(p)
	return tok
}

// dropTombstones frees node p and its ancestors while each is an
// unreferenced tombstone left without children (SGLang keeps no leaf a
// tombstone: _iteratively_delete_tombstone_leaf, after a leaf's eviction
// by either pool) and files the first node kept as a leaf if it is one.
// It returns the tokens freed.
func (r *Tree) dropTombstones(p int32) int64 {
	var freed int64
	for p != root {
		pn := &r.nodes[p]
		if !pn.sgone || pn.ref != 0 || pn.kid != 0 || pn.stail != 0 {
			break
		}
		var tok int64
		tok, p = r.freeNode(p)
		freed += tok
	}
	r.pushIfLeaf(p) // only an unreferenced leaf, not the root
	return freed
}

func (r *Tree) slideLive(e lruEntry) bool {
	n := &r.nodes[e.node]
	return n.live && n.sver == e.ver && n.sfree
}

// compactSlide drops stale entries from the released nodes' heap.
func (r *Tree) compactSlide() {
	kept := r.slru[:0]
	for _, e := range r.slru {
		if r.slideLive(e) {
			kept = append(kept, e)
		}
	}
	r.slru = kept
	r.slru.init()
}

// touchSubtree journals the slots of node n and every node below it: a
// tombstone there can move any match that runs through n (the window
// before a match's end must be free of them), and every such match looks
// from, or hangs from, one of those slots. Children in block-id order, so
// the journal is the same from run to run.
func (r *Tree) touchSubtree(n int32) {
	if !r.journal {
		return
	}
	stack := []int32{n}
	var keys []uint64
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		nd := &r.nodes[x]
		r.touch(nd.parent, nd.key[0])
		keys = keys[:0]
		for c := nd.kid; c != 0; c = r.nodes[c].next {
			keys = append(keys, r.nodes[c].key[0])
		}
		slices.Sort(keys)
		for _, k := range keys {
			c, _ := r.child(x, k)
			stack = append(stack, c)
		}
	}
}

// slideLimit cuts m, the plain match of blocks, to where the sliding KV
// of the window before its end is held (see the top of this file).
func (r *Tree) slideLimit(blocks []uint64, m Match) Match {
	// The path's nodes, root side first, and the partly matched child.
	path := r.pathBuf[:0]
	for x := m.Node; x > root; x = r.nodes[x].parent {
		path = append(path, x)
	}
	slices.Reverse(path)
	r.pathBuf = path
	infinite := true // no tombstone yet: the run from the root counts whatever its length
	var run int64
	best := Match{Node: root}
	prev := Match{Node: root}
	cur := Match{Node: root}
	step := func(n int32, blocksIn int, tokensIn int64) bool {
		nd := &r.nodes[n]
		if nd.sgone {
			if infinite || run >= r.srun {
				best = prev
			}
			infinite, run = false, 0
		} else {
			run += tokensIn
		}
		cur.Blocks += blocksIn
		cur.Tokens += tokensIn
		return nd.sgone
	}
	for _, x := range path {
		prev = cur
		step(x, len(r.nodes[x].key), r.nodes[x].tokens)
		cur.Node, cur.depth = x, int32(cur.Blocks)
	}
	if m.Blocks > cur.Blocks {
		// The match runs on partly into a child edge.
		child, _ := r.child(m.Node, blocks[m.depth])
		prev = cur
		step(child, m.Blocks-cur.Blocks, m.Tokens-cur.Tokens)
	}
	if infinite || run >= r.srun || r.runsIntoTail(blocks, m) {
		return m
	}
	best.raw, best.rawDepth = m.Node, m.depth
	return best
}

// SetTailsHoldWindow is for a tree that records prompts only, as a
// router's belief of a worker's cache does (kvc's index), of workers that
// keep each turn's output below its prompt (TailBelow marks the prompt's
// end). Such a worker's next-turn match runs on into the output, whose
// last window or two still hold their sliding KV (SGLang inserts a
// finished request with swa_evicted_seqlen: only the part its decode
// freed is a tombstone), so a tombstone on the prompt does not cut it. The
// tree cannot see the output; with this set, a match whose blocks run on
// past the end of a node with a tail below it is not cut there. A tree
// that files the outputs itself (the engine's) names them before it
// matches and leaves this off.
func (r *Tree) SetTailsHoldWindow() { r.tailRun = true }

// runsIntoTail reports whether blocks run on past the tail its plain
// match m reaches (TailInto), with SetTailsHoldWindow.
func (r *Tree) runsIntoTail(blocks []uint64, m Match) bool {
	return r.tailRun && len(blocks) > m.Blocks && r.TailInto(blocks, m).node > root
}

// TailInto names the node with a tail below it (TailBelow) that the plain
// match m of blocks reaches: the node m ends at, or the child m runs into
// up to its last block — a prompt's last block, partly filled when it
// was sent, takes a new id as the output fills it, so the next turn's
// blocks part from the tail's prompt one block before its end (the
// engine names a tail below the prompt's last whole block, output.go). A
// zero Handle when there is none.
func (r *Tree) TailInto(blocks []uint64, m Match) Handle {
	n := m.Node
	if int(m.depth) < m.Blocks {
		c, _ := r.child(n, blocks[m.depth])
		if m.Blocks != int(m.depth)+len(r.nodes[c].key)-1 {
			return Handle{}
		}
		n = c
	}
	if n <= root || r.nodes[n].stail == 0 {
		return Handle{}
	}
	return r.HandleOf(n)
}

// TailsBelow is the tails TailBelow recorded below node n.
func (r *Tree) TailsBelow(n int32) int32 {
	if n <= root || int(n) >= len(r.nodes) {
		return 0
	}
	return r.nodes[n].stail
}

// slideGrow keeps the sliding counters when node n's tokens change by d.
func (r *Tree) slideGrow(n *node, d int64) {
	if n.sfree {
		r.sfreeTok += d
	}
	if n.sgone {
		r.sgoneTok += d
	}
	if n.ref == 0 && (n.sfree || n.sgone) {
		r.sevictTok += d
	}
}

// EvictableSlideTokens is the tokens of unreferenced nodes whose sliding
// part is released or gone: evicting them frees only their full layers'
// part of what EvictableTokens counts.
func (r *Tree) EvictableSlideTokens() int64 { return r.sevictTok }

// PassGain is what a holder's first Pass to blocks (after its Lock on
// lock) would change, without changing anything: the tokens it would
// release (nodes every other holder has passed, or that none holds) and
// the released tokens inside its window it would take back as held.
func (r *Tree) PassGain(lock int32, blocks int) (release, hold int64) {
	if r.srun == 0 || lock <= root {
		return 0, 0
	}
	end := r.PathDepth(lock)
	for x := lock; x > root; x = r.nodes[x].parent {
		nd := &r.nodes[x]
		start := end - len(nd.key)
		switch {
		case start >= blocks:
			if nd.sfree {
				hold += nd.tokens
			}
		case !nd.sfree && !nd.sgone && nd.ref-1 == nd.srel:
			if end <= blocks {
				release += nd.tokens
			} else {
				release += int64(blocks-start) * r.blockSize
			}
		case nd.sfree && end > blocks:
			// Split at the boundary, its part inside the window is held.
			hold += nd.tokens - int64(blocks-start)*r.blockSize
		}
		end = start
	}
	return release, hold
}

// LockUncut is Lock on the plain match, whatever tombstones it crosses:
// for an owner that files more KV below a path it holds whole (a finished
// turn's output below its prompt, output.go), not for a request that
// attends to the path.
func (r *Tree) LockUncut(blocks []uint64, lastTokens int64, now float64) Match {
	r.nocut = true
	m := r.Match(blocks, lastTokens)
	r.nocut = false
	return r.LockMatched(blocks, m, now)
}

// TailBelow records that an owner keeps d more (or, negative, fewer) output
// tails below the node h names, outside the tree (the engine's session
// tails, output.go): in SGLang a finished request's output is inserted
// below its prompt, so the prompt's last node is an inner node there, and
// the sliding pool tombstones it rather than evicting it whole. A stale
// handle changes nothing.
func (r *Tree) TailBelow(h Handle, d int32) {
	if h.node <= root || int(h.node) >= len(r.nodes) {
		return
	}
	if n := &r.nodes[h.node]; n.live && n.gen == h.gen {
		n.stail += d
	}
}

// Bury tombstones blocks [from, to) of the path from the root to node n,
// splitting the nodes the bounds fall inside: KV whose sliding part its
// request freed before the tree got it (SGLang's insert with
// swa_evicted_seqlen makes that part of a finished request a tombstone
// node, swa_radix_cache.py _insert_helper).
func (r *Tree) Bury(n int32, from, to int) {
	if r.srun == 0 || n <= root {
		return
	}
	x, end := n, r.PathDepth(n)
	to = min(to, end)
	if from >= to {
		return
	}
	for x > root && end-len(r.nodes[x].key) >= to {
		end -= len(r.nodes[x].key)
		x = r.nodes[x].parent
	}
	if x > root && end > to {
		x = r.split(x, to-(end-len(r.nodes[x].key)))
		end = to
	}
	for x > root && end > from {
		start := end - len(r.nodes[x].key)
		if start < from {
			r.split(x, from-start) // x keeps [from, end)
		}
		r.bury(x)
		end = start
		x = r.nodes[x].parent
	}
}

// bury makes node n a tombstone.
func (r *Tree) bury(n int32) {
	r.unrelease(n)
	nd := &r.nodes[n]
	if nd.sgone {
		return
	}
	nd.sgone = true
	nd.sver++
	r.sgoneTok += nd.tokens
	if nd.ref == 0 {
		r.sevictTok += nd.tokens
	}
	r.ver++
	r.touchSubtree(n)
}
