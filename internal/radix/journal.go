package radix

// The change journal: which matches a change to the tree can move, so an
// owner that keeps many prompts' matches (a worker's waiting queue, ordered
// by uncached tokens) re-matches only those, not every prompt at every
// change of Version.
//
// A prompt's match is decided by two slots: the child slot it looks into
// below its deepest fully matched node (a new child there, or a change to
// the child it partly matches, moves it), and the slot that node hangs from
// (the node growing its partial block, losing its last blocks, being split
// or freed moves it). Every change to the tree is a change at one slot: a
// node added or freed below a parent, or a node's own edge changed (it
// hangs from the same slot). The journal lists those slots.

// Slot is a child position in the tree: the child of Parent whose edge
// starts with block First.
type Slot struct {
	Parent int32
	First  uint64
}

// Journal turns the change journal on or off (off: nothing is recorded).
func (r *Tree) Journal(on bool) {
	r.journal = on
	r.changes = r.changes[:0]
}

// TakeChanges returns the slots changed since the last call, in order (a
// slot may repeat), and empties the journal. The slice is reused by the
// next changes: the caller reads it before it changes the tree again.
func (r *Tree) TakeChanges() []Slot {
	c := r.changes
	r.changes = r.changes[:0]
	return c
}

func (r *Tree) touch(parent int32, first uint64) {
	if r.journal {
		r.changes = append(r.changes, Slot{Parent: parent, First: first})
	}
}

// MatchSlots returns the slots a change at which can move m, the Match of
// blocks taken now: the slot m looks into below its deepest node (ok
// false when m ends with the prompt there) and the slot that node hangs
// from (ok false at the root).
func (r *Tree) MatchSlots(blocks []uint64, m Match) (look Slot, lookOK bool, up Slot, upOK bool) {
	if m.limited() {
		// A match a tombstone cut short moves with the plain match.
		m.Node, m.depth = m.raw, m.rawDepth
	}
	if int(m.depth) < len(blocks) {
		look, lookOK = Slot{Parent: m.Node, First: blocks[m.depth]}, true
	}
	if m.Node != root {
		n := &r.nodes[m.Node]
		up, upOK = Slot{Parent: n.parent, First: n.key[0]}, true
	}
	return look, lookOK, up, upOK
}
