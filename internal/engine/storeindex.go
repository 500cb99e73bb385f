package engine

import (
	"fmt"

	"github.com/pdhybrid/pdhybrid/internal/radix"
)

// StorageIndex is what a storage pool holds (storage.go), as its workers
// read and write it: prefix paths of KV blocks with an LRU. The engine's
// own is a radix tree in this process (NewStorageIndex); a pool several
// worker processes share is kept by one service they reach over loopback
// (the emulator's StoreServer and StoreClient), so that emulated workers
// started by `pdhybrid up` see one store, as SGLang's workers see one
// Mooncake or 3FS store. Calls are synchronous; an index that cannot be
// reached answers as an empty one (nothing matched, writes skipped).
type StorageIndex interface {
	// Open joins the pool with the capacity this worker would give it (in
	// tokens, blocks of blockSize) and returns the pool's: the first
	// worker's sizes it. A pool of another block size is an error.
	Open(blockSize int, capacity int64) (int64, error)
	// Match is how much of a path (blocks, the last holding last tokens)
	// the pool holds from its start: whole blocks and tokens.
	Match(blocks []uint64, last int64) (nblocks int, tokens int64)
	// Write files a path, making room by the pool's LRU: the tokens it
	// added and evicted, and false when it could not take the path.
	Write(now float64, blocks []uint64, last int64) (added, evicted int64, ok bool)
	// Touch marks a path as used now (its LRU).
	Touch(now float64, blocks []uint64, last int64)
	// Tokens is what the pool holds.
	Tokens() int64
}

// localIndex is a storage pool's index in this process.
type localIndex struct {
	tree     *radix.Tree
	bs       int
	capacity int64
}

// NewStorageIndex is an empty in-process index of capacity tokens in
// blocks of blockSize (what a storage service keeps for its clients).
func NewStorageIndex(blockSize int, capacity int64) StorageIndex {
	return &localIndex{tree: radix.New(blockSize), bs: blockSize, capacity: capacity}
}

func (x *localIndex) Open(blockSize int, capacity int64) (int64, error) {
	if blockSize != x.bs {
		return 0, fmt.Errorf("storage pool of %d-token blocks, this worker's are %d", x.bs, blockSize)
	}
	return x.capacity, nil
}

func (x *localIndex) Match(blocks []uint64, last int64) (int, int64) {
	m := x.tree.Match(blocks, last)
	return m.Blocks, m.Tokens
}

func (x *localIndex) Write(now float64, blocks []uint64, last int64) (added, evicted int64, ok bool) {
	m := x.tree.Lock(blocks, last, now)
	need := int64(len(blocks)-1)*int64(x.bs) + last - m.Tokens
	if free := x.capacity - x.tree.Tokens(); need > free {
		evicted = x.tree.Evict(need - free)
		if x.capacity-x.tree.Tokens() < need {
			x.tree.Unlock(m.Node, now)
			return 0, evicted, false
		}
	}
	node, added := x.tree.Insert(m.Node, blocks, m.Blocks, last, now)
	x.tree.Unlock(node, now)
	return added, evicted, true
}

func (x *localIndex) Touch(now float64, blocks []uint64, last int64) {
	x.tree.Unlock(x.tree.Lock(blocks, last, now).Node, now)
}

func (x *localIndex) Tokens() int64 { return x.tree.Tokens() }

// StorageBooker is a StorageIndex kept outside this process that also
// books prefetches on the pool's aggregate link (a store's NICs or disks,
// which every worker's prefetches share; StoragePool.BandwidthBytes in
// one process). Time is the caller's: start and the answer are in the
// seconds of the worker that books.
type StorageBooker interface {
	// Book books a prefetch of bytes that began at start and returns when
	// the aggregate link has carried it, first booked first served; false
	// when the pool's aggregate bandwidth is unlimited or the service did
	// not answer (the worker's own link alone limits the prefetch).
	Book(start float64, bytes int64) (free float64, ok bool)
}

// book books a prefetch of bytes that began at start on the pool's
// aggregate link, in this process (reserve) or at the pool's service
// (StorageBooker), and returns when both links have carried it; false
// when no aggregate link limits it.
func (st *storageTier) book(start float64, bytes int64) (float64, bool) {
	if st.shared != nil && st.shared.aggBW > 0 {
		return st.reserve(start, bytes), true
	}
	if b, ok := st.idx.(StorageBooker); ok && st.remote {
		if free, ok := b.Book(start, bytes); ok {
			return max(start+st.link.TransferS(bytes), free+st.link.SetupS), true
		}
	}
	return 0, false
}
