package kvc

// blockIndex is what the router believes one worker caches: a bounded set of
// block ids with least-recently-dispatched eviction. The router cannot see
// inside a worker (over HTTP it never could), so it keeps this belief from
// what it sent there, as the seed's kv-aware router did.
//
// LRU is kept lazily: every touch appends (block, stamp) to a FIFO, and the
// map holds each block's latest stamp; when the set is over capacity the
// FIFO head is dropped if its stamp is still current, skipped if stale.
type blockIndex struct {
	capacity int
	stamp    uint64
	last     map[uint64]uint64
	fifo     []touch
	head     int
}

type touch struct {
	block, stamp uint64
}

func newBlockIndex(capacity int) *blockIndex {
	return &blockIndex{capacity: capacity, last: map[uint64]uint64{}}
}

// prefix is the number of leading blocks believed present. A request's
// blocks are always added together, so presence is (almost) monotone along
// the prompt and a binary search finds the boundary in O(log n) lookups.
func (x *blockIndex) prefix(blocks []uint64) int {
	lo, hi := 0, len(blocks) // blocks[:lo] present; blocks[hi:] not known
	for lo < hi {
		mid := (lo + hi) / 2
		if _, ok := x.last[blocks[mid]]; ok {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

func (x *blockIndex) add(blocks []uint64) {
	x.stamp++
	for _, b := range blocks {
		x.last[b] = x.stamp
		x.fifo = append(x.fifo, touch{b, x.stamp})
	}
	for len(x.last) > x.capacity && x.head < len(x.fifo) {
		t := x.fifo[x.head]
		x.head++
		if x.last[t.block] == t.stamp {
			delete(x.last, t.block)
		}
	}
	if live := len(x.fifo) - x.head; x.head > 1024 && x.head*2 > len(x.fifo) || live > 2*len(x.last)+1024 {
		x.compact()
	}
}

// compact drops consumed and stale FIFO entries so memory follows the set.
func (x *blockIndex) compact() {
	kept := x.fifo[:0]
	for _, t := range x.fifo[x.head:] {
		if x.last[t.block] == t.stamp {
			kept = append(kept, t)
		}
	}
	x.fifo = kept
	x.head = 0
}
