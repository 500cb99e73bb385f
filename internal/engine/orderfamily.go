package engine

import "github.com/pdhybrid/pdhybrid/internal/radix"

// Prompt families of the waiting order. On the BLIS spec a KVC v3 decoder's
// queue holds a dozen 72K-token prompts of one group at a time, and every
// change to the group's 40K-token prefix in the cache names them all
// (order.go's watch): each was matched again from the root, comparing the
// same shared prefix against the same edge (4,631 slot changes named 58,956
// requests a run; all the compares were in the matches that grew back or
// stayed the same, those that shrank cost nothing). Re-matching was 18 % of
// the run's samples, the compares 4.5 %.
//
// A family is the waiting prompts that start with the same block, long
// enough for this to matter (familyMinBlocks), and an anchor: the first
// member's blocks, read in place while it waits and copied when it leaves
// a family that still has members (a prompt's blocks may be rewritten once
// its prefill is done; copying every family's anchor at once allocated 7 %
// more bytes on the BLIS spec, most families ending with their first
// member). Each member learns, the first time
// it is matched again, how many blocks it shares with the anchor; each
// match taken shows how many of the anchor's blocks the cache holds as it
// stands (the member's matched blocks, up to what it shares with the
// anchor). Until the cache changes (radix.Tree.Version), a member matched
// after another follows that many of its shared blocks without comparing
// them (radix.Tree.MatchSkip): the same match, a fraction of the compares.

// familyMinBlocks is the shortest prompt that joins a family: shorter ones
// cost little to match again, and one-turn short requests (each its own
// family) would pay a copy and two map operations for nothing.
const familyMinBlocks = 64

// waitFamily is the waiting prompts that start with one block.
type waitFamily struct {
	anchor  []uint64 // the first member's blocks, or a copy once it left
	owner   *Request // the member whose blocks anchor is; nil for a copy
	members int
	ver     uint64 // the cache's version known was learned at
	known   int    // anchor blocks the cache holds at ver, as far as seen
}

// famRef is a member's family and the blocks it shares with the anchor
// (-1: not yet compared), for the blocks it had then.
type famRef struct {
	f      *waitFamily
	shared int
	blocks *uint64 // &Blocks[0] and len(Blocks) when shared was compared
	n      int
}

// joinFamily files a tracked waiting request in its prompt's family.
func (o *waitOrder) joinFamily(r *Request) {
	if len(r.Blocks) < familyMinBlocks {
		return
	}
	if o.fams == nil {
		o.fams, o.famOf = map[uint64]*waitFamily{}, map[*Request]famRef{}
	}
	f := o.fams[r.Blocks[0]]
	if f == nil {
		f = &waitFamily{anchor: r.Blocks, owner: r}
		o.fams[r.Blocks[0]] = f
	}
	f.members++
	o.famOf[r] = famRef{f: f, shared: -1}
}

// leaveFamily takes a request leaving the queue out of its family.
func (o *waitOrder) leaveFamily(r *Request) {
	ref, ok := o.famOf[r]
	if !ok {
		return
	}
	delete(o.famOf, r)
	f := ref.f
	if f.members--; f.members == 0 {
		delete(o.fams, f.anchor[0])
	} else if f.owner == r {
		f.anchor, f.owner = append([]uint64(nil), f.anchor...), nil
	}
}

// matchInFamily matches r's prompt as Match would, skipping the blocks
// another member's match at the cache's current version showed held, and
// records what r's own match shows.
func (w *Worker) matchInFamily(r *Request, last int64) radix.Match {
	o := &w.order
	ref, ok := o.famOf[r]
	if !ok || ref.f.members < 2 {
		return w.tree.Match(r.Blocks, last)
	}
	f := ref.f
	if ver := w.tree.Version(); f.ver != ver {
		f.ver, f.known = ver, 0
	}
	if ref.shared < 0 || ref.blocks != &r.Blocks[0] || ref.n != len(r.Blocks) {
		ref.shared = radix.CommonPrefix(f.anchor, r.Blocks)
		ref.blocks, ref.n = &r.Blocks[0], len(r.Blocks)
		o.work += uint64(ref.shared) + 1
		o.famOf[r] = ref
	}
	skip := min(ref.shared, f.known)
	o.skipped += uint64(skip)
	m := w.tree.MatchSkip(r.Blocks, last, skip)
	// The cache holds r's matched blocks, and the anchor's first shared
	// blocks are r's.
	f.known = max(f.known, min(ref.shared, m.Blocks))
	return m
}
