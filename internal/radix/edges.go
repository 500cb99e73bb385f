package radix

import "fmt"

// A tree's child links. Every edge is filed once in one open-addressed
// table keyed by (parent node, first block of the child's edge), and each
// node keeps its children in a list (kid, next, prev) for the few walks
// that visit them all. A map per node was the tree's largest cost after
// the block comparisons: a lookup went through two pointers to the map's
// group, and every node that gained a child allocated a map (about 190
// bytes), so a simulation spent a tenth of its radix time in map code.
// Nothing reads the order of the table or of the lists, so the results are
// those of the maps.

// edge is one slot of the table; child 0 (the root, which is nobody's
// child) marks it empty.
type edge struct {
	first  uint64
	parent int32
	child  int32
}

// edgeTable is a linear-probing hash table of edges, at most half full,
// with backward-shift deletion (no tombstones, so a lookup stops at the
// first empty slot however many edges came and went).
type edgeTable struct {
	slots []edge
	n     int
	shift uint8 // 64 − log2(len(slots))
}

// minEdgeSlots is the table's first size.
const minEdgeSlots = 16

// home is the slot an edge hashes to: a mix of both words whose top bits
// pick the slot, so that block ids that count up (converted traces) spread.
func (t *edgeTable) home(parent int32, first uint64) int {
	h := first ^ uint64(uint32(parent))*0x9E3779B97F4A7C15
	h ^= h >> 31
	h *= 0xBF58476D1CE4E5B9
	return int(h >> t.shift)
}

// get is the child of parent whose edge starts with first.
func (t *edgeTable) get(parent int32, first uint64) (int32, bool) {
	if t.n == 0 {
		return 0, false
	}
	mask := len(t.slots) - 1
	for i := t.home(parent, first); ; i = (i + 1) & mask {
		e := &t.slots[i]
		if e.child == 0 {
			return 0, false
		}
		if e.first == first && e.parent == parent {
			return e.child, true
		}
	}
}

// set files child as parent's child whose edge starts with first and
// returns the child it replaces there, 0 for none.
func (t *edgeTable) set(parent int32, first uint64, child int32) int32 {
	if 2*(t.n+1) > len(t.slots) {
		t.grow()
	}
	mask := len(t.slots) - 1
	for i := t.home(parent, first); ; i = (i + 1) & mask {
		e := &t.slots[i]
		if e.child == 0 {
			*e = edge{first: first, parent: parent, child: child}
			t.n++
			return 0
		}
		if e.first == first && e.parent == parent {
			old := e.child
			e.child = child
			return old
		}
	}
}

// del removes parent's child edge that starts with first, if filed, and
// shifts back the edges after it that probed past its slot.
func (t *edgeTable) del(parent int32, first uint64) {
	if t.n == 0 {
		return
	}
	mask := len(t.slots) - 1
	i := t.home(parent, first)
	for {
		e := &t.slots[i]
		if e.child == 0 {
			return
		}
		if e.first == first && e.parent == parent {
			break
		}
		i = (i + 1) & mask
	}
	t.n--
	for j := i; ; {
		j = (j + 1) & mask
		e := t.slots[j]
		if e.child == 0 {
			t.slots[i] = edge{}
			return
		}
		// e may fill the hole at i unless its home lies cyclically in (i, j].
		if h := t.home(e.parent, e.first); (i <= j && (h <= i || h > j)) || (i > j && h <= i && h > j) {
			t.slots[i] = e
			i = j
		}
	}
}

// grow doubles the table (or makes its first) and files every edge again.
func (t *edgeTable) grow() {
	old := t.slots
	size := max(minEdgeSlots, 2*len(old))
	t.slots = make([]edge, size)
	t.shift = uint8(64 - log2(size))
	t.n = 0
	for _, e := range old {
		if e.child != 0 {
			t.set(e.parent, e.first, e.child)
		}
	}
}

// log2 of a power of two.
func log2(n int) int {
	k := 0
	for n > 1 {
		n >>= 1
		k++
	}
	return k
}

// child is parent's child whose edge starts with first.
func (r *Tree) child(parent int32, first uint64) (int32, bool) {
	return r.edges.get(parent, first)
}

// link files node c, whose parent and key are set, as its parent's child,
// in the place of the child whose edge started with the same block, if
// any (a split's upper node takes the place of the node it cut); it
// returns that child, 0 for none, unlinked from the parent's list.
func (r *Tree) link(c int32) int32 {
	nd := &r.nodes[c]
	p := nd.parent
	old := r.edges.set(p, nd.key[0], c)
	if old != 0 {
		r.unlist(old)
	}
	pn := &r.nodes[p]
	nd = &r.nodes[c]
	nd.prev, nd.next = 0, pn.kid
	if pn.kid != 0 {
		r.nodes[pn.kid].prev = c
	}
	pn.kid = c
	return old
}

// unlink takes node c out of its parent's children.
func (r *Tree) unlink(c int32) {
	nd := &r.nodes[c]
	r.edges.del(nd.parent, nd.key[0])
	r.unlist(c)
}

// unlist takes node c out of its parent's list of children.
func (r *Tree) unlist(c int32) {
	nd := &r.nodes[c]
	if nd.prev != 0 {
		r.nodes[nd.prev].next = nd.next
	} else {
		r.nodes[nd.parent].kid = nd.next
	}
	if nd.next != 0 {
		r.nodes[nd.next].prev = nd.prev
	}
	nd.prev, nd.next = 0, 0
}

// hasKids is whether node n has a child; manyKids whether it has two or
// more.
func (r *Tree) hasKids(n int32) bool { return r.nodes[n].kid != 0 }

func (r *Tree) manyKids(n int32) bool {
	k := r.nodes[n].kid
	return k != 0 && r.nodes[k].next != 0
}

// checkList reports a break in the list of children around node c (Check).
func (r *Tree) checkList(c int32) error {
	nd := &r.nodes[c]
	if nd.prev == 0 && r.nodes[nd.parent].kid != c ||
		nd.prev != 0 && (r.nodes[nd.prev].next != c || r.nodes[nd.prev].parent != nd.parent) ||
		nd.next != 0 && (r.nodes[nd.next].prev != c || r.nodes[nd.next].parent != nd.parent) {
		return fmt.Errorf("radix: node %d is out of place in its parent's list of children", c)
	}
	return nil
}
