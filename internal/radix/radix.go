// Package radix is a prefix cache over block hashes, shared by the engine
// model (a worker's real cache) and the control plane (what the router
// believes a worker caches).
package radix

import (
	"fmt"
)

// Tree is a prefix cache over block hashes: a radix tree whose compressed
// edges are runs of uint64 block ids. Nodes are reference-counted by the
// requests that use them; unreferenced leaves are evicted least recently used
// first, a whole node at a time (as SGLang's RadixCache does).
//
// Token accounting is exact: every block holds blockSize tokens except a
// prompt's last block, which may be partial. A partial block can only end a
// node's edge; when a later prompt runs past the same block id the block is
// known to be full and the node grows to match.
//
// Nodes live in one slice and refer to each other by index, so a tree of
// millions of blocks is a handful of allocations, not millions of pointers.
type Tree struct {
	blockSize int64
	nodes     []node
	free      []int32
	edges     edgeTable // every child link (edges.go)
	lru       lruHeap
	seq       uint64

	tokens    int64  // tokens held by all nodes
	evictable int64  // tokens in nodes with ref == 0
	ver       uint64 // changes whenever a match could change (Version)

	journal bool   // record changed slots (Journal)
	changes []Slot // slots changed since the last TakeChanges
	work    uint64 // nodes and blocks lookups visited (Work)

	// Sliding-window state (sliding.go); srun 0: none kept.
	srun      int64   // untombstoned tokens a match needs before its end
	sfreeTok  int64   // tokens of released nodes
	sgoneTok  int64   // tokens of tombstoned nodes
	sevictTok int64   // tokens of unreferenced nodes released or tombstoned
	spool     bool    // the sliding layers have a pool of their own (SetSlidingPool)
	nocut     bool    // LockUncut's match: no tombstone cut
	tailRun   bool    // a tail below a node holds a window (SetTailsHoldWindow)
	slru      lruHeap // released nodes, by release time
	pathBuf   []int32

	rootWatch func(first uint64, present bool) // WatchRoot
}

// WatchRoot has fn called whenever the root gains a child edge starting
// with block first (present) or loses it: an owner of several trees (a
// router's per-worker indexes) can then tell which of them can match a
// prompt at all from one table, without a lookup in each tree's root.
func (r *Tree) WatchRoot(fn func(first uint64, present bool)) { r.rootWatch = fn }

type node struct {
	parent  int32
	key     []uint64 // the edge's blocks
	tokens  int64    // tokens on the edge
	partial int64    // tokens of the edge's last block if it is partial, else 0
	kid     int32    // first of its children (edges.go), 0 for none
	next    int32    // its parent's next child, 0 for none
	prev    int32    // its parent's previous child, 0 when it is the first
	ref     int32
	access  float64 // last time a request used this node
	ver     uint32  // bumped whenever the node's LRU standing changes
	gen     uint32  // bumped whenever the slot is freed, so a Handle can tell
	live    bool

	srel  int32   // holders that have passed the node (sliding.go)
	sver  uint32  // bumped whenever its released standing changes
	sat   float64 // when its sliding part was released
	sfree bool    // sliding part released, still cached
	sgone bool    // sliding part gone: a tombstone
	stail int32   // output tails an owner keeps below it (TailBelow)
}

const root = 0

// New makes an empty tree for the given block size (tokens per block).
func New(blockSize int) *Tree {
	r := &Tree{blockSize: int64(blockSize)}
	r.nodes = append(r.nodes, node{parent: -1, live: true, ref: 1})
	return r
}

// Version changes whenever what the tree holds changes (blocks added,
// grown or freed), so a Match taken at one version holds while the version
// is the same: a request that waits for room matches again only then.
func (r *Tree) Version() uint64 { return r.ver }

// Work is the number of nodes and blocks the tree's lookups have visited:
// a deterministic measure of their cost, for tests that bound how it grows
// with the workload (wall time on a shared machine is not one).
func (r *Tree) Work() uint64 { return r.work }

// Tokens is the number of tokens the tree holds.
func (r *Tree) Tokens() int64 { return r.tokens }

// EvictableTokens is the number of tokens in nodes no request references.
func (r *Tree) EvictableTokens() int64 { return r.evictable }

// Match is the result of a prefix lookup.
type Match struct {
	Node int32 // deepest node fully matched (root when nothing matched)
	// A match a tombstone cut short (sliding.go) remembers where the
	// plain match ended (raw, rawDepth; rawDepth 0 when it was not cut
	// short): changes there can move it. The two share words with Node
	// and depth: a Match is kept in every waiting request's memo
	// (engine.Request), and a word more would move the simulator's
	// per-request record to a larger size class.
	raw      int32
	Blocks   int   // blocks matched
	Tokens   int64 // tokens matched
	depth    int32 // blocks from the root to Node (Blocks less a partial edge)
	rawDepth int32
}

// limited says a tombstone cut the match short. A cut always leaves the
// plain match deeper than the one returned, so its depth is not 0; a cut
// of a match that ended at the root's own edge changes nothing that
// MatchSlots reads.
func (m Match) limited() bool { return m.rawDepth > 0 }

// Match finds the longest cached prefix of blocks. It does not change LRU
// order; Lock does. lastTokens is the token count of the prompt's last block
// (blockSize when it is full): a cached partial block only matches as the
// prompt's own last block with no more tokens than the prompt has there.
func (r *Tree) Match(blocks []uint64, lastTokens int64) Match {
	return r.MatchSkip(blocks, lastTokens, 0)
}

// MatchSkip is Match for a caller that knows the tree holds blocks[:skip]
// along one path from the root: another prompt that shares those blocks
// matched at least skip blocks against the tree as it stands (its
// Match.Blocks counts only blocks the tree holds). Those blocks are
// followed, not compared; everything else is decided as Match decides it,
// so the result is Match's. Prompts that share a long prefix and wait on
// one worker (KVC v3's shortest-first decoders on the BLIS spec: a dozen
// 72K-token prompts re-matched after each change to their group's 40K
// prefix) then compare only what follows it.
func (r *Tree) MatchSkip(blocks []uint64, lastTokens int64, skip int) Match {
	m := r.match(blocks, lastTokens, min(skip, len(blocks)))
	// A prompt whose last block is partial may end on a block the tree holds
	// full: the match covers only the tokens the prompt has.
	if len(blocks) > 0 {
		m.Tokens = min(m.Tokens, int64(len(blocks)-1)*r.blockSize+lastTokens)
	}
	return m
}

func (r *Tree) match(blocks []uint64, lastTokens int64, skip int) Match {
	m := Match{Node: root}
	cur := int32(root)
	i := 0
	for i < len(blocks) {
		child, ok := r.child(cur, blocks[i])
		if !ok {
			break
		}
		n := &r.nodes[child]
		var k int
		if known := skip - i; known >= len(n.key) {
			k = len(n.key) // the caller knows this edge is blocks[i:i+len(key)]
		} else if known > 0 {
			k = known + CommonPrefix(n.key[known:], blocks[i+known:])
		} else {
			k = CommonPrefix(n.key, blocks[i:])
		}
		r.work += uint64(max(k-max(skip-i, 0), 0)) + 1
		if k < len(n.key) {
			// Partial edge match: count the full blocks matched; the tree
			// must be split before a request can lock them (see Lock).
			m.Blocks += k
			m.Tokens += int64(k) * r.blockSize
			break
		}
		// Whole edge matched.
		if n.partial > 0 {
			isPromptEnd := i+k == len(blocks)
			if !isPromptEnd || lastTokens < n.partial {
				// The prompt runs past (or stops short inside) a block the
				// tree holds only partly: stop before that block.
				m.Blocks += k - 1
				m.Tokens += n.tokens - n.partial
				break
			}
		}
		m.Blocks += k
		m.Tokens += n.tokens
		m.Node = child
		cur = child
		i += k
		m.depth = int32(i)
	}
	if r.sgoneTok > 0 && !r.nocut {
		return r.slideLimit(blocks, m)
	}
	return m
}

// Lock matches blocks, splitting an edge if the match ends inside one so that
// the matched prefix is exactly one path, and references every node on it.
// It returns the match; Unlock(m.Node) releases it.
func (r *Tree) Lock(blocks []uint64, lastTokens int64, now float64) Match {
	return r.LockMatched(blocks, r.Match(blocks, lastTokens), now)
}

// LockMatched is Lock given the Match of the same blocks, taken at the
// tree's current Version.
func (r *Tree) LockMatched(blocks []uint64, m Match, now float64) Match {
	// Walk again to the match end, splitting the last edge if needed.
	cur := int32(root)
	i := 0
	for i < m.Blocks {
		child, _ := r.child(cur, blocks[i])
		n := &r.nodes[child]
		remain := m.Blocks - i
		if remain < len(n.key) {
			child = r.split(child, remain)
		}
		i += len(r.nodes[child].key)
		cur = child
	}
	m.Node = cur
	r.ref(cur, now)
	return m
}

// Relock references n and every ancestor again, as Lock did: a lock
// Unlock dropped, taken back while nothing evicted the path meanwhile.
func (r *Tree) Relock(n int32, now float64) { r.ref(n, now) }

// ref adds a reference to n and every ancestor, touching their access time.
func (r *Tree) ref(n int32, now float64) {
	for ; n > root; n = r.nodes[n].parent {
		nd := &r.nodes[n]
		if nd.ref == 0 {
			r.evictable -= nd.tokens
			if nd.sfree || nd.sgone {
				r.sevictTok -= nd.tokens
			}
		}
		nd.ref++
		nd.access = now
		nd.ver++
		if r.spool && nd.sfree {
			r.unrelease(n)
		}
	}
}

// Unlock drops the reference Lock (or Insert) took on n and its ancestors.
func (r *Tree) Unlock(n int32, now float64) {
	for ; n > root; n = r.nodes[n].parent {
		nd := &r.nodes[n]
		nd.ref--
		if nd.ref < 0 {
			panic("radix: node unlocked more often than locked")
		}
		if nd.ref == 0 {
			r.evictable += nd.tokens
			if nd.sfree || nd.sgone {
				r.sevictTok += nd.tokens
			}
			nd.access = now
			r.pushIfLeaf(n)
			if r.spool {
				r.slideTouched(n)
				r.maybeRelease(n, now)
			}
		} else if nd.srel == nd.ref {
			// The holders left all passed it (sliding.go).
			r.maybeRelease(n, now)
		}
	}
}

// Insert adds blocks[from:] below node at, which must be the locked result
// of a Lock over the same blocks, and moves the lock to the new deepest node.
// It returns the node now locked and the number of tokens the tree adopted
// (blocks already present, inserted meanwhile by another request, are not
// adopted; their tokens are the caller's to free).
func (r *Tree) Insert(at int32, blocks []uint64, from int, lastTokens int64, now float64) (int32, int64) {
	return r.insert(at, blocks, from, lastTokens, now, false)
}

// InsertShared is Insert keeping the caller's blocks as the new edge key
// instead of copying them. Only for blocks that are never written again (the
// simulator's frozen session chains): copying every new prompt path into
// the engines' trees and the router's belief was half of an overloaded KVC
// simulation's allocation. The tree never writes a key.
func (r *Tree) InsertShared(at int32, blocks []uint64, from int, lastTokens int64, now float64) (int32, int64) {
	return r.insert(at, blocks, from, lastTokens, now, true)
}

func (r *Tree) insert(at int32, blocks []uint64, from int, lastTokens int64, now float64, share bool) (int32, int64) {
	cur := at
	i := from
	var adopted int64
	if i == len(blocks) && at != root {
		// The lock ended on the prompt's last block, which the tree holds
		// partly: the request computed the rest of that block, so the tree
		// grows to the prompt's token count there.
		adopted += r.growPartial(at, i == len(blocks), lastTokens)
	}
	for i < len(blocks) {
		child, ok := r.child(cur, blocks[i])
		if !ok {
			key := blocks[i:len(blocks):len(blocks)] // full slice: no append reaches past it
			if !share {
				key = append([]uint64(nil), key...)
			}
			nn := r.newNode(cur, key)
			nd := &r.nodes[nn]
			nd.tokens = int64(len(nd.key)) * r.blockSize
			if lastTokens < r.blockSize {
				nd.partial = lastTokens
				nd.tokens += lastTokens - r.blockSize
			}
			nd.access = now
			r.tokens += nd.tokens
			r.ver++
			adopted += nd.tokens
			// The new node is referenced below through ref(); count it as
			// evictable first so ref's 0→1 bookkeeping balances.
			r.evictable += nd.tokens
			cur = nn
			i = len(blocks)
			break
		}
		n := &r.nodes[child]
		k := CommonPrefix(n.key, blocks[i:])
		if k < len(n.key) {
			child = r.split(child, k)
			n = &r.nodes[child]
		}
		if n.sgone || n.sfree {
			// The inserting request computed these blocks again: their
			// sliding part is held anew.
			r.revive(child)
		}
		adopted += r.growPartial(child, i+k == len(blocks), lastTokens)
		cur = child
		i += k
	}
	r.ref(cur, now)
	r.Unlock(at, now)
	return cur, adopted
}

// growPartial extends node n's partial last block to what a prompt now
// shows of it: full when the prompt runs past it (isEnd false) or fills it,
// else up to lastTokens. It returns the tokens added.
func (r *Tree) growPartial(n int32, isEnd bool, lastTokens int64) int64 {
	nd := &r.nodes[n]
	if nd.partial == 0 {
		return 0
	}
	var grow int64
	switch {
	case !isEnd || lastTokens >= r.blockSize:
		grow = r.blockSize - nd.partial
		nd.partial = 0
	case lastTokens > nd.partial:
		grow = lastTokens - nd.partial
		nd.partial = lastTokens
	default:
		return 0
	}
	nd.tokens += grow
	r.tokens += grow
	r.slideGrow(nd, grow)
	r.ver++
	r.touch(nd.parent, nd.key[0])
	if nd.ref == 0 {
		r.evictable += grow
	}
	return grow
}

// CommonPrefix is the number of leading blocks a and b share. Session
// prompts share thousands of blocks with what a tree holds, so it compares
// 64 blocks at a time first (an array comparison, which the runtime does
// with vector instructions), then the rest one by one: a fifth of a
// KV-aware simulation's time went to the one-by-one loop alone.
func CommonPrefix(a, b []uint64) int {
	n := min(len(a), len(b))
	a, b = a[:n], b[:n]
	const run = 64
	k := 0
	for k+run <= n && *(*[run]uint64)(a[k : k+run]) == *(*[run]uint64)(b[k : k+run]) {
		k += run
	}
	for k < n && a[k] == b[k] {
		k++
	}
	return k
}

// split cuts node n's edge after k blocks, returning the new upper node.
func (r *Tree) split(n int32, k int) int32 {
	old := r.nodes[n]
	upper := r.newNode(old.parent, old.key[:k:k])
	up := &r.nodes[upper]
	up.tokens = int64(k) * r.blockSize
	up.ref = old.ref
	up.access = old.access
	up.srel, up.sfree, up.sgone, up.sat = old.srel, old.sfree, old.sgone, old.sat
	if up.sfree {
		r.pushSlide(upper)
	}
	// newNode filed upper in n's place below their parent; n hangs below
	// upper now.
	lo := &r.nodes[n]
	lo.parent = upper
	lo.key = old.key[k:]
	lo.tokens = old.tokens - up.tokens
	r.link(n)
	return upper
}

func (r *Tree) newNode(parent int32, key []uint64) int32 {
	var idx int32
	if len(r.free) > 0 {
		idx = r.free[len(r.free)-1]
		r.free = r.free[:len(r.free)-1]
		o := &r.nodes[idx]
		r.nodes[idx] = node{ver: o.ver + 1, gen: o.gen, sver: o.sver + 1}
	} else {
		idx = int32(len(r.nodes))
		r.nodes = append(r.nodes, node{})
	}
	nd := &r.nodes[idx]
	nd.parent, nd.key, nd.live = parent, key, true
	r.touch(parent, key[0])
	// A split files its upper node in the place of the node it cuts, under
	// the same block: the root's watcher hears of new blocks only.
	if replaced := r.link(idx); parent == root && replaced == 0 && r.rootWatch != nil {
		r.rootWatch(key[0], true)
	}
	return idx
}

// PathBlocks returns the block ids from the root to node n, and the
// tokens they hold, as a new slice: what a worker sends when it ships a
// cached path elsewhere (a D→P snapshot).
func (r *Tree) PathBlocks(n int32) ([]uint64, int64) {
	var depth int
	for x := n; x > root; x = r.nodes[x].parent {
		depth += len(r.nodes[x].key)
	}
	out := make([]uint64, depth)
	var tokens int64
	for x := n; x > root; x = r.nodes[x].parent {
		nd := &r.nodes[x]
		depth -= len(nd.key)
		copy(out[depth:], nd.key)
		tokens += nd.tokens
	}
	return out, tokens
}

// Check recomputes the tree's counters from its nodes and reports any
// drift; property tests call it after every operation.
func (r *Tree) Check() error {
	var tokens, evictable, sfree, sgone, sevict int64
	linked := 0
	for i := 1; i < len(r.nodes); i++ {
		n := &r.nodes[i]
		if !n.live {
			continue
		}
		if n.tokens <= 0 || n.ref < 0 {
			return fmt.Errorf("radix: node %d holds %d tokens with %d references", i, n.tokens, n.ref)
		}
		if n.srel < 0 || n.srel > n.ref || (n.sfree && n.sgone) {
			return fmt.Errorf("radix: node %d passed by %d of %d holders (released %v, gone %v)", i, n.srel, n.ref, n.sfree, n.sgone)
		}
		if n.sfree {
			sfree += n.tokens
		}
		if n.sgone {
			sgone += n.tokens
		}
		if n.ref == 0 && (n.sfree || n.sgone) {
			sevict += n.tokens
		}
		tokens += n.tokens
		if n.ref == 0 {
			evictable += n.tokens
		}
		if c, _ := r.child(n.parent, n.key[0]); c != int32(i) {
			return fmt.Errorf("radix: node %d is not linked from its parent", i)
		}
		if err := r.checkList(int32(i)); err != nil {
			return err
		}
		linked++
	}
	if linked != r.edges.n {
		return fmt.Errorf("radix: %d child links filed for %d nodes", r.edges.n, linked)
	}
	if tokens != r.tokens || evictable != r.evictable {
		return fmt.Errorf("radix: counters say %d tokens (%d evictable), nodes hold %d (%d)", r.tokens, r.evictable, tokens, evictable)
	}
	if sfree != r.sfreeTok || sgone != r.sgoneTok || sevict != r.sevictTok {
		return fmt.Errorf("radix: sliding counters say %d released, %d gone, %d evictable; nodes hold %d, %d, %d", r.sfreeTok, r.sgoneTok, r.sevictTok, sfree, sgone, sevict)
	}
	return nil
}
